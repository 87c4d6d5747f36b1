// SPDX-License-Identifier: MIT
// The anvil tests' L2 sequencer uptime feed (test/support/anvil.ts deployAnvilSequencerUptimeFeed).
// TestSequencerUptimeFeed.json beside it is its build: `node scripts/compile-test-contract.cjs TestSequencerUptimeFeed`.
pragma solidity 0.8.37;

/// Chainlink's L2 sequencer uptime feed as readers see it: answer 0 while the sequencer is up, 1 while
/// it is down; startedAt is when the status last changed (the L1 timestamp of the report), updatedAt
/// when the feed last heard a report. A report of an unchanged status only moves updatedAt, and a report
/// older than the latest status change is ignored, as Chainlink's feed does. Anyone may report here:
/// on a real L2 only the L1 validator's messages may.
contract TestSequencerUptimeFeed {
    struct Round {
        bool down;
        uint64 startedAt;
        uint64 updatedAt;
    }

    uint8 public constant decimals = 0;
    string public constant description = "L2 Sequencer Uptime Status Feed";
    uint256 public constant version = 1;
    uint80 public latestRound;
    mapping(uint80 => Round) private rounds;

    /// The first round, as Chainlink's constructor records it: `initiallyDown` since this block.
    constructor(bool initiallyDown) {
        record(initiallyDown, uint64(block.timestamp));
    }

    /// A status report: the sequencer is `down` (or up) as of `timestamp` (seconds since the epoch).
    function updateStatus(bool down, uint64 timestamp) external {
        Round storage latest = rounds[latestRound];
        if (latest.startedAt > timestamp) return;
        if (latest.down == down) latest.updatedAt = uint64(block.timestamp);
        else record(down, timestamp);
    }

    function record(bool down, uint64 timestamp) private {
        latestRound += 1;
        rounds[latestRound] = Round(down, timestamp, uint64(block.timestamp));
    }

    function latestRoundData() external view returns (uint80, int256, uint256, uint256, uint80) {
        Round memory round = rounds[latestRound];
        return (latestRound, round.down ? int256(1) : int256(0), round.startedAt, round.updatedAt, latestRound);
    }
}
