import { decodeFunctionResult, encodeFunctionData, erc20Abi, getAddress, hexToBigInt, multicall3Abi, type Hex } from 'viem';
import { NodeUnavailableError, type BalanceRead, type ChainTip, type RelayedAnswer, type RelayedCall } from '../provider';
import type { TokenContracts } from './evm-rpc';

/** Multicall3's address, the same on every chain it is deployed on (https://www.multicall3.com). */
export const MULTICALL3_ADDRESS = '0xcA11bde05977b3631167028862bE2a173976CA11';
/** Calls per JSON-RPC batch: hosted nodes refuse larger batches. */
const CALLS_PER_BATCH = 100;
/** balanceOf calls folded into one Multicall3 eth_call: far below any node's eth_call gas cap. */
const BALANCES_PER_MULTICALL = 500;
/** Batches in flight at once. */
const BATCHES_IN_FLIGHT = 4;

/**
 * Balances at one block of an Ethereum JSON-RPC node: ether by eth_getBalance, ERC-20 by balanceOf
 * through eth_call, each pinned by the block's hash (EIP-1898, canonical required), sent as JSON-RPC
 * batches; token balances are folded into Multicall3's aggregate3 where the chain has it deployed at
 * that block. A token contract with no code at the block answers nothing: no one held it then (0).
 */
export class EvmBalanceReader {
  private multicallDeployed = false;

  constructor(
    private readonly tokens: TokenContracts,
    private readonly relay: (calls: RelayedCall[]) => Promise<RelayedAnswer[]>,
  ) {}

  async balancesAt(reads: BalanceRead[], block: ChainTip): Promise<bigint[]> {
    const at = { blockHash: block.hash, requireCanonical: true };
    const balances = new Array<bigint>(reads.length);
    const native: number[] = [];
    const tokens: number[] = [];
    reads.forEach((read, index) => (read.assetId === 'ETH' ? native : tokens).push(index));
    const calls: { indexes: number[]; call: RelayedCall; decode: (result: Hex) => bigint[] }[] = native.map((index) => ({
      indexes: [index],
      call: { method: 'eth_getBalance', params: [getAddress(reads[index]!.address), at] },
      decode: (result) => [hexToBigInt(result)],
    }));
    if (tokens.length > 0 && (await this.hasMulticall(at))) {
      for (let start = 0; start < tokens.length; start += BALANCES_PER_MULTICALL) {
        const indexes = tokens.slice(start, start + BALANCES_PER_MULTICALL);
        const data = encodeFunctionData({
          abi: multicall3Abi,
          functionName: 'aggregate3',
          args: [indexes.map((index) => ({ target: this.contractOf(reads[index]!.assetId), allowFailure: true, callData: balanceOfCall(reads[index]!.address) }))],
        });
        calls.push({
          indexes,
          call: { method: 'eth_call', params: [{ to: MULTICALL3_ADDRESS, data }, at] },
          decode: (result) =>
            decodeFunctionResult({ abi: multicall3Abi, functionName: 'aggregate3', data: result }).map(({ success, returnData }) => {
              if (!success) throw new NodeUnavailableError('A token contract refused balanceOf.');
              return balanceOfResult(returnData);
            }),
        });
      }
    } else {
      for (const index of tokens) {
        const read = reads[index]!;
        calls.push({
          indexes: [index],
          call: { method: 'eth_call', params: [{ to: this.contractOf(read.assetId), data: balanceOfCall(read.address) }, at] },
          decode: (result) => [balanceOfResult(result)],
        });
      }
    }
    const batches: (typeof calls)[] = [];
    for (let start = 0; start < calls.length; start += CALLS_PER_BATCH) batches.push(calls.slice(start, start + CALLS_PER_BATCH));
    const runBatch = async (batch: typeof calls) => {
      const answers = await this.relay(batch.map((entry) => entry.call));
      batch.forEach((entry, position) => {
        const answer = answers[position]!;
        if ('error' in answer) throw new NodeUnavailableError(`The node refused ${entry.call.method} at block ${block.height}: ${answer.error.message}`);
        if (typeof answer.result !== 'string' || !answer.result.startsWith('0x')) throw new NodeUnavailableError(`The node answered ${entry.call.method} with an unexpected shape.`);
        entry.decode(answer.result as Hex).forEach((balance, offset) => (balances[entry.indexes[offset]!] = balance));
      });
    };
    for (let start = 0; start < batches.length; start += BATCHES_IN_FLIGHT) await Promise.all(batches.slice(start, start + BATCHES_IN_FLIGHT).map(runBatch));
    return balances;
  }

  private contractOf(assetId: string): `0x${string}` {
    const contract = this.tokens[assetId];
    if (!contract) throw new NodeUnavailableError(`No ${assetId} contract is configured for this node.`);
    return contract;
  }

  /** Whether Multicall3 has code at the block; once seen, remembered (a deployment is not undone). */
  private async hasMulticall(at: { blockHash: string }): Promise<boolean> {
    if (this.multicallDeployed) return true;
    const [answer] = await this.relay([{ method: 'eth_getCode', params: [MULTICALL3_ADDRESS, at] }]);
    if ('error' in answer!) throw new NodeUnavailableError(`The node refused eth_getCode: ${answer.error.message}`);
    this.multicallDeployed = typeof answer!.result === 'string' && answer!.result !== '0x';
    return this.multicallDeployed;
  }
}

const balanceOfCall = (owner: string) => encodeFunctionData({ abi: erc20Abi, functionName: 'balanceOf', args: [getAddress(owner)] });

/** A balanceOf answer; none at all means the contract had no code at the block, so no one held it. */
const balanceOfResult = (data: Hex): bigint => (data === '0x' ? 0n : decodeFunctionResult({ abi: erc20Abi, functionName: 'balanceOf', data }));
