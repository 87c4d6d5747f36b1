// Builds a test contract of this folder with solc-js (the npm `solc` the project pins) into <Name>.json
// beside it: the ABI and creation bytecode the tests deploy. Usage: node test/support/contracts/compile.cjs TestPriceFeed
const fs = require('node:fs');
const path = require('node:path');
const solc = require('solc');

const name = process.argv[2];
if (!name) throw new Error('usage: node test/support/contracts/compile.cjs <ContractName>');
const source = `${name}.sol`;
const input = {
  language: 'Solidity',
  sources: { [source]: { content: fs.readFileSync(path.join(__dirname, source), 'utf8') } },
  settings: { optimizer: { enabled: true, runs: 200 }, outputSelection: { '*': { '*': ['abi', 'evm.bytecode.object'] } } },
};
const output = JSON.parse(solc.compile(JSON.stringify(input)));
const errors = (output.errors ?? []).filter((entry) => entry.severity === 'error');
if (errors.length > 0) throw new Error(errors.map((entry) => entry.formattedMessage).join('\n'));
const contract = output.contracts[source][name];
const artifact = { contractName: name, compiler: `solc ${solc.version()}`, abi: contract.abi, bytecode: `0x${contract.evm.bytecode.object}` };
fs.writeFileSync(path.join(__dirname, `${name}.json`), `${JSON.stringify(artifact, null, 2)}\n`);
