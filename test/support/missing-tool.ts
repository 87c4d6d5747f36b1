/**
 * A test whose real tool (btcd, anvil, LNbits...) is missing: on a user's machine it is skipped, saying
 * why; in CI (`CI` set) it fails, since there every tool is installed and a skip would hide a test that
 * never ran.
 */
export function missingTool(context: Mocha.Context, why: string): never {
  if (process.env.CI) throw new Error(`${why}: CI runs every test (scripts/ensure-tools.sh installs the tools)`);
  console.log(`      ${why}: skipped on this machine (CI fails instead)`);
  return context.skip();
}
