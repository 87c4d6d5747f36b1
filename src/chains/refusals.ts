/**
 * What a node's error answer to a broadcast proves, in one place for every chain (issue 48 part 5). Only a
 * definite refusal, answered by the node itself, proves the transaction was not taken: a send refused so
 * at its first handing fails and its lock is released. Anything else (a gateway's HTTP error, a code or a
 * message not known as a refusal) is the node unavailable: the same bytes are broadcast again and the
 * chain asked again, and nothing is released on it. Pure: no I/O.
 */
import type { ChainId } from '../catalogue/service';
import { NodeUnavailableError, TransactionRejectedError } from './provider';

/**
 * `held`: the node already has the transaction (in its mempool or its chain): it counts as broadcast.
 * `refused`: a definite refusal, `reason` a short machine code (`nonce_too_low`, `nonce_too_high`,
 * `insufficient_funds`, `fee_too_low`, `invalid_signature`, `double_spend`, `dust_output`, `malformed`,
 * `gas_limit`, `rejected`). `unavailable`: proves nothing.
 */
export type BroadcastVerdict = { kind: 'held' } | { kind: 'refused'; reason: string } | { kind: 'unavailable' };

export interface NodeError {
  code: number;
  message: string;
  data?: unknown;
}

const UNAVAILABLE: BroadcastVerdict = { kind: 'unavailable' };
const refused = (reason: string): BroadcastVerdict => ({ kind: 'refused', reason });

/**
 * The verdict on `error`, the JSON-RPC error a `chain` node answered a broadcast with under HTTP status
 * `httpStatus`. EVM and Solana nodes answer their refusals with HTTP 200; Bitcoin Core with 500 (btcd
 * 200): any other status is a proxy's or a gateway's, whatever its body says.
 */
export function judgeBroadcastError(chain: ChainId, error: NodeError, httpStatus: number): BroadcastVerdict {
  switch (chain) {
    case 'ethereum':
      return httpStatus >= 200 && httpStatus < 300 ? judgeEvm(error) : UNAVAILABLE;
    case 'bitcoin':
      return httpStatus === 200 || httpStatus === 500 ? judgeBitcoin(error) : UNAVAILABLE;
    case 'solana':
      return httpStatus >= 200 && httpStatus < 300 ? judgeSolana(error) : UNAVAILABLE;
    case 'tron':
      // Only the embedded devnet serves Tron, and it throws its own refusals.
      return UNAVAILABLE;
  }
}

/**
 * geth, reth, erigon, nethermind and anvil: the transaction pool's and the validator's errors, matched by
 * message (their codes differ: -32000, -32003, -32010). Ordered: "replacement transaction underpriced"
 * is a fee refusal, not an unknown one.
 */
const EVM_REFUSALS: [RegExp, string][] = [
  [/nonce too low|nonce has already been used/i, 'nonce_too_low'],
  [/nonce too high/i, 'nonce_too_high'],
  [/insufficient funds|insufficient balance/i, 'insufficient_funds'],
  [/underpriced|fee cap less than|max fee per gas less than|fee too low|tip above fee cap|max priority fee per gas higher than max fee|maxfeepergas.*less than.*basefee/i, 'fee_too_low'],
  [/intrinsic gas too low|exceeds block gas limit|gas limit reached|out of gas/i, 'gas_limit'],
  [/invalid sender|invalid signature|invalid chain ?id|incorrect chain ?id|only replay-protected/i, 'invalid_signature'],
  [/transaction type not supported|typed transaction too short|rlp|could not decode|failed to decode|oversized data|invalid transaction/i, 'malformed'],
];

/** EVM "already known": the pool holds these very bytes. */
const EVM_HELD = /already known|known transaction|already imported/i;

function judgeEvm(error: NodeError): BroadcastVerdict {
  if (EVM_HELD.test(error.message)) return { kind: 'held' };
  return refusalOf(EVM_REFUSALS, error.message);
}

/** The reason a node gives an EVM call it refuses (an estimate: the call would revert, too little balance...), `rejected` when none matches. */
export function evmRefusalReason(message: string): string {
  const verdict = refusalOf(EVM_REFUSALS, message);
  return verdict.kind === 'refused' ? verdict.reason : 'rejected';
}

/** Bitcoin Core's and btcd's sendrawtransaction codes (Core's rpc/protocol.h, btcd's btcjson). */
const BITCOIN = { deserialization: -22, verifyError: -25, verifyRejected: -26, alreadyInChain: -27 } as const;

/** Core: "txn-already-in-mempool", "txn-already-known"; btcd: "already have transaction", "already exists". */
const BITCOIN_HELD = /txn-already-(in-mempool|known)|already have transaction|already exists in (the )?block ?chain|already in (the )?block ?chain|transaction already exists/i;

const BITCOIN_REFUSALS: [RegExp, string][] = [
  [/decode|deserializ|malformed/i, 'malformed'],
  [/dust/i, 'dust_output'],
  [/signature|script-verify|script verify|failed to validate input|witness/i, 'invalid_signature'],
  [/already spent|missingorspent|missing-inputs|missing inputs|orphan|conflict|replacement|double spend/i, 'double_spend'],
  [/belowout|less than the amount spent|insufficient funds/i, 'insufficient_funds'],
  [/fee|priority/i, 'fee_too_low'],
];

/**
 * -27 (already in the chain) and the "already have it" messages: held. -22 (not a transaction): malformed.
 * -25 (inputs missing or spent) and -26 (refused by policy or consensus): definite refusals, their reason
 * read from the message (`rejected` when none matches: the code alone is the node's own verdict). Any
 * other code proves nothing.
 */
function judgeBitcoin(error: NodeError): BroadcastVerdict {
  if (error.code === BITCOIN.alreadyInChain || BITCOIN_HELD.test(error.message)) return { kind: 'held' };
  if (error.code === BITCOIN.deserialization) return refused('malformed');
  if (error.code !== BITCOIN.verifyError && error.code !== BITCOIN.verifyRejected) return UNAVAILABLE;
  const verdict = refusalOf(BITCOIN_REFUSALS, error.message);
  return verdict.kind === 'refused' ? verdict : refused(error.code === BITCOIN.verifyError ? 'double_spend' : 'rejected');
}

/**
 * Solana: -32002 (the preflight simulation failed, a blockhash it does not know among the reasons) and
 * -32003 (a signature does not verify) are the node's verdict on the transaction, which it then forwards
 * nowhere; -32602 with a decoding message is bytes it cannot read. Anything else (-32005 node unhealthy,
 * ...) proves nothing.
 */
function judgeSolana(error: NodeError): BroadcastVerdict {
  const text = `${error.message} ${JSON.stringify(error.data ?? null)}`;
  if (/AlreadyProcessed|already been processed/.test(text)) return { kind: 'held' };
  if (error.code === -32602) return /failed to deserialize|invalid transaction|could not decode|decode/i.test(text) ? refused('malformed') : UNAVAILABLE;
  if (error.code !== -32002 && error.code !== -32003) return UNAVAILABLE;
  if (/InsufficientFundsForRent/.test(text)) return refused('dust_output');
  if (/InsufficientFundsForFee|insufficient (funds|lamports)|AccountNotFound|no record of a prior credit/i.test(text)) return refused('insufficient_funds');
  if (/signature verification|SignatureFailure|MissingSignatureForFee/i.test(text) || error.code === -32003) return refused('invalid_signature');
  return refused('rejected');
}

/**
 * A broadcast the node answered with `error` under `httpStatus`: the transaction's id when the node holds
 * it; TransactionRejectedError on a definite refusal; else NodeUnavailableError (proves nothing).
 */
export function broadcastErrorOutcome(chain: ChainId, error: NodeError, httpStatus: number, txid: () => string): { txid: string } {
  const verdict = judgeBroadcastError(chain, error, httpStatus);
  if (verdict.kind === 'held') return { txid: txid() };
  if (verdict.kind === 'refused') throw new TransactionRejectedError(verdict.reason, `The node refused the transaction: ${error.message}`);
  throw new NodeUnavailableError(`The node answered the broadcast with an error that is no known refusal (HTTP ${httpStatus}, code ${error.code}): ${error.message}`);
}

function refusalOf(table: [RegExp, string][], message: string): BroadcastVerdict {
  for (const [pattern, reason] of table) if (pattern.test(message)) return refused(reason);
  return UNAVAILABLE;
}
