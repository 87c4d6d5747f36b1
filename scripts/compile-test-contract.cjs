// Builds a test contract of test/support/contracts with solc-js (the npm `solc` the project pins) into
// <Name>.json beside its source: the ABI and creation bytecode the anvil tests deploy, checked in so that
// tests need no compiler. Usage: node scripts/compile-test-contract.cjs TestPriceFeed
'use strict';
const fs = require('node:fs');
const path = require('node:path');
const solc = require('solc');

const name = process.argv[2];
if (!name) throw new Error('usage: node scripts/compile-test-contract.cjs <ContractName>');
const folder = path.resolve(__dirname, '../test/support/contracts');
const source = `${name}.sol`;
const input = {
  language: 'Solidity',
  sources: { [source]: { content: fs.readFileSync(path.join(folder, source), 'utf8') } },
  settings: { optimizer: { enabled: true, runs: 200 }, outputSelection: { '*': { '*': ['abi', 'evm.bytecode.object'] } } },
};
const output = JSON.parse(solc.compile(JSON.stringify(input)));
const errors = (output.errors ?? []).filter((entry) => entry.severity === 'error');
if (errors.length > 0) throw new Error(errors.map((entry) => entry.formattedMessage).join('\n'));
const contract = output.contracts[source][name];
const artifact = { contractName: name, compiler: `solc ${solc.version()}`, abi: contract.abi, bytecode: `0x${contract.evm.bytecode.object}` };
fs.writeFileSync(path.join(folder, `${name}.json`), `${JSON.stringify(artifact, null, 2)}\n`);
