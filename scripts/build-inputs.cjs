// Prints one digest of everything `npm run build` reads: the folders tsconfig.json includes (but
// test/generated/, which the build writes), tsconfig.json, package.json, package-lock.json (the compiler
// and every type the build sees) and the build's own scripts. `npm start` builds only when it differs from
// the digest recorded in dist/ by the last build (scripts/lib.sh, build_if_changed).
//
// Names and contents both count: a deleted or renamed file changes the digest as an edited one does, since
// its stale output would stay in dist/ otherwise. Environment variables never count: they are read at run time.
'use strict';
const crypto = require('node:crypto');
const fs = require('node:fs');
const path = require('node:path');

const root = path.resolve(__dirname, '..');
const GENERATED = 'test/generated';
const FILES = ['tsconfig.json', 'package.json', 'package-lock.json', 'scripts/openapi-types.cjs', 'scripts/load-ts.cjs'];

/** Every file under `dir` (relative to root), sorted, so the digest does not depend on the file system's order. */
function filesUnder(dir) {
  if (dir === GENERATED || !fs.existsSync(path.join(root, dir))) return [];
  return fs
    .readdirSync(path.join(root, dir), { withFileTypes: true })
    .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))
    .flatMap((entry) => {
      const name = `${dir}/${entry.name}`;
      if (entry.isDirectory()) return filesUnder(name);
      return entry.isFile() ? [name] : [];
    });
}

const { include } = JSON.parse(fs.readFileSync(path.join(root, 'tsconfig.json'), 'utf8'));
const hash = crypto.createHash('sha256');
for (const file of [...FILES, ...include.flatMap(filesUnder)]) {
  hash.update(`${file}\0`);
  hash.update(fs.readFileSync(path.join(root, file)));
  hash.update('\0');
}
console.log(hash.digest('hex'));
