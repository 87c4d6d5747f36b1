// `npm run docs:api`: writes docs/api.md, the API reference, from the OpenAPI document GET /openapi.json
// serves (src/system/api-doc.ts renders it). test/api-doc.test.ts fails when the file is not what this writes.
'use strict';
const fs = require('node:fs');
const path = require('node:path');
const { root } = require('./load-ts.cjs');

const { buildOpenApiDocumentOf } = require('../src/system/openapi.ts');
const { routeModules } = require('../src/modules.ts');
const { renderApiDoc } = require('../src/system/api-doc.ts');

const target = path.join(root, 'docs/api.md');
fs.writeFileSync(target, renderApiDoc(buildOpenApiDocumentOf(routeModules)));
console.log(`wrote ${path.relative(root, target)}`);
