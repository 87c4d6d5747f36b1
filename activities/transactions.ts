import type { ChainNodes } from '../src/chains/nodes';
import type { Config } from '../src/config';
import type { Orm } from '../src/db/orm';
import { armRefillForWallet } from '../src/gas-stations/service';
import type { KeyService } from '../src/keys/service';
import type { Logger } from '../src/logger';
import { broadcastTransaction } from '../src/transactions/broadcasting';
import { checkTransaction } from '../src/transactions/checking';
import type { LifecycleDeps } from '../src/transactions/lifecycle';
import { failTransaction, settleTransaction } from '../src/transactions/settlement';
import { signTransaction } from '../src/transactions/signing';
import { replaceTransaction } from '../src/transactions/replacements';
import { transactionWithStarts } from './with-starts';

export interface TransactionActivityDeps {
  config: Config;
  orm: Orm;
  log: Logger;
  chains: ChainNodes;
  keys: KeyService;
}

/** The steps of a send (by stage: src/transactions/signing.ts, broadcasting.ts, checking.ts and settlement.ts); each is idempotent under the transaction's row lock. */
export const createTransactionActivities = (deps: TransactionActivityDeps) => {
  const lifecycle: LifecycleDeps = { config: deps.config, chains: deps.chains, keys: deps.keys, em: () => deps.orm.em.fork(), transaction: transactionWithStarts(deps), walletDebited: armRefillForWallet };
  return {
    signTransaction: (input: { transactionId: string }) => signTransaction(lifecycle, input.transactionId),
    broadcastTransaction: (input: { transactionId: string }) => broadcastTransaction(lifecycle, input.transactionId),
    checkTransaction: (input: { transactionId: string }) => checkTransaction(lifecycle, input.transactionId),
    settleTransaction: (input: { transactionId: string }) => settleTransaction(lifecycle, input.transactionId),
    replaceTransaction: (input: { transactionId: string }) => replaceTransaction(lifecycle, input.transactionId),
    failTransaction: (input: { transactionId: string; reason: string; message: string }) => failTransaction(lifecycle, input.transactionId, input.reason, input.message),
  };
};
