// Lets a build-time script require src/*.ts straight from its TypeScript, transpiled file by file
// without type checking (tsc checks everything in the build): no full compile just to run a function of src/.
'use strict';
const fs = require('node:fs');
const path = require('node:path');
const ts = require('typescript');

const root = path.resolve(__dirname, '..');
const { config } = ts.readConfigFile(path.join(root, 'tsconfig.json'), ts.sys.readFile);
const { options } = ts.convertCompilerOptionsFromJson(config.compilerOptions, root);
require.extensions['.ts'] = (module, filename) => {
  const source = fs.readFileSync(filename, 'utf8');
  module._compile(ts.transpileModule(source, { compilerOptions: options, fileName: filename }).outputText, filename);
};

module.exports = { root };
