// SPDX-License-Identifier: MIT
// The anvil tests' Chainlink price feed (test/support/anvil.ts deployAnvilPriceFeed). TestPriceFeed.json beside
// it is its build, made by `node scripts/compile-test-contract.cjs TestPriceFeed` (solc-js, the npm `solc`
// the project pins); rebuild it the same way after changing this file.
pragma solidity 0.8.37;

/// Chainlink's AggregatorV3Interface, answering the rounds the test sets: any answer (zero, negative and
/// outside its bounds included) at any update time, so that a test can make the feed fresh, stale or broken
/// at will. It is both of Chainlink's contracts a reader meets: the proxy (`aggregator()`, here itself) and
/// the OCR aggregator behind it, whose `minAnswer` and `maxAnswer` are immutables set when it is deployed.
contract TestPriceFeed {
    struct Round {
        int256 answer;
        uint256 startedAt;
        uint256 updatedAt;
    }

    uint8 public immutable decimals;
    int192 public immutable minAnswer;
    int192 public immutable maxAnswer;
    string public description;
    uint256 public constant version = 4;
    uint80 public latestRound;
    mapping(uint80 => Round) private rounds;

    constructor(uint8 decimals_, string memory description_, int192 minAnswer_, int192 maxAnswer_) {
        decimals = decimals_;
        description = description_;
        minAnswer = minAnswer_;
        maxAnswer = maxAnswer_;
    }

    /// The proxy's current aggregator: where the bounds are read.
    function aggregator() external view returns (address) {
        return address(this);
    }

    /// Opens the next round with `answer`, updated at `updatedAt` (seconds since the epoch).
    function setRound(int256 answer, uint256 updatedAt) external {
        latestRound += 1;
        rounds[latestRound] = Round(answer, updatedAt, updatedAt);
    }

    function getRoundData(uint80 roundId) public view returns (uint80, int256, uint256, uint256, uint80) {
        Round memory round = rounds[roundId];
        return (roundId, round.answer, round.startedAt, round.updatedAt, roundId);
    }

    /// Before any round is set this answers round 0: answer 0, updated at 0 (a feed that says nothing).
    function latestRoundData() external view returns (uint80, int256, uint256, uint256, uint80) {
        return getRoundData(latestRound);
    }
}
