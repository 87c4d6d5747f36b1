// SPDX-License-Identifier: MIT
// The anvil tests' ERC-20 (test/support/anvil.ts deployAnvilToken). FixedSupplyToken.json beside it is its
// build, checked in as OpenZeppelin's prebuilt presets are: solc 0.8.19 (npm `solc@0.8.19`, standard JSON
// input, optimizer on, 200 runs), imports resolved from node_modules/@openzeppelin/contracts (4.9.6),
// output abi and evm.bytecode.object. Rebuild it the same way after changing this file.
pragma solidity 0.8.19;

import "@openzeppelin/contracts/token/ERC20/presets/ERC20PresetFixedSupply.sol";

/// OpenZeppelin's fixed-supply preset with the decimals of the token it stands in for (USDC and USDT have 6; the preset says 18).
contract FixedSupplyToken is ERC20PresetFixedSupply {
    uint8 private immutable _decimals;

    constructor(string memory name, string memory symbol, uint8 decimals_, uint256 initialSupply, address owner)
        ERC20PresetFixedSupply(name, symbol, initialSupply, owner)
    {
        _decimals = decimals_;
    }

    function decimals() public view override returns (uint8) {
        return _decimals;
    }
}
