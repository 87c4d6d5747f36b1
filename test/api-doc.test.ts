import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { routeModules } from '../src/modules';
import { renderApiDoc } from '../src/system/api-doc';
import { buildOpenApiDocumentOf } from '../src/system/openapi';

/** docs/api.md is generated from the OpenAPI document; the user-facing documents stay inside the repository. */
const ROOT = path.resolve(__dirname, '../..');
const API_DOC = path.join(ROOT, 'docs/api.md');

describe('the API reference (docs/api.md)', () => {
  const document = buildOpenApiDocumentOf(routeModules);

  it('is what `npm run docs:api` writes from the OpenAPI document now', () => {
    const written = readFileSync(API_DOC, 'utf8');
    const current = renderApiDoc(document);
    if (written === current) return;
    const writtenLines = written.split('\n');
    const currentLines = current.split('\n');
    const first = currentLines.findIndex((line, index) => line !== writtenLines[index]);
    assert.fail(
      `docs/api.md is out of date with the routes' schemas: run \`npm run docs:api\` and commit the result ` +
        `(first difference at line ${first + 1}: expected ${JSON.stringify(currentLines[first])}, found ${JSON.stringify(writtenLines[first])})`,
    );
  });

  it('has a heading, a request and a response for every operation', () => {
    const text = renderApiDoc(document);
    for (const [route, item] of Object.entries(document.paths ?? {})) {
      for (const method of Object.keys(item).filter((key) => ['get', 'post', 'put', 'patch', 'delete'].includes(key))) {
        const section = sectionOf(text, method, route);
        assert.match(section, /```bash\ncurl -sS/, `no request example for ${method.toUpperCase()} ${route}`);
        assert.match(section, /\nResponse `\d{3}`/, `no response for ${method.toUpperCase()} ${route}`);
      }
    }
  });

  it('lists every required body field of a route as required, with an example value in its request', () => {
    const text = renderApiDoc(document);
    const section = sectionOf(text, 'post', '/v1/webhooks');
    assert.match(section, /\| `name` \| [^|]+ \| yes \|/);
    assert.match(section, /\| `url` \| [^|]+ \| yes \|/);
    const body = /-d '(\{[\s\S]*?\})'/.exec(section);
    assert.ok(body, 'the webhook request has a JSON body');
    const parsed = JSON.parse(body[1]!) as Record<string, unknown>;
    assert.ok('name' in parsed && 'url' in parsed, 'the example sends the required fields');
  });
});

/** One operation's part of the reference, from its heading to the next one. */
function sectionOf(text: string, method: string, route: string): string {
  const start = text.indexOf(`### \`${method.toUpperCase()} ${route}\`\n`);
  assert.ok(start >= 0, `no section for ${method.toUpperCase()} ${route}`);
  const end = text.indexOf('\n### ', start + 1);
  return text.slice(start, end < 0 ? undefined : end);
}

describe('user-facing documents', () => {
  it('point nowhere outside the repository (no ../shared: a clone does not have it)', () => {
    const files = ['README.md', ...readdirSync(path.join(ROOT, 'docs')).filter((name) => name.endsWith('.md')).map((name) => `docs/${name}`)];
    const offenders = files.flatMap((file) =>
      readFileSync(path.join(ROOT, file), 'utf8')
        .split('\n')
        .flatMap((line, index) => (line.includes('../shared') ? [`${file}:${index + 1}: ${line.trim()}`] : [])),
    );
    assert.deepEqual(offenders, [], 'link to docs/api.md or a doc in docs/ instead');
  });
});
