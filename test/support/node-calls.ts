import { TransactionContext } from '@mikro-orm/core';
import { DevnetProvider } from '../../src/chains/devnet/provider';
import { ChainNodes } from '../../src/chains/nodes';

/**
 * Records every call to a configured chain node (not the embedded devnet, which is the database)
 * made inside a database transaction, by the app and the workers of this process, until stopped:
 * such a call holds a pooled connection, and any row lock taken, while the node answers.
 */
export function watchNodeCallsInTransactions(): { calls: string[]; stop: () => void } {
  const provider = ChainNodes.prototype.provider;
  const calls: string[] = [];
  ChainNodes.prototype.provider = async function (this: ChainNodes, ...args: Parameters<ChainNodes['provider']>) {
    const real = await provider.apply(this, args);
    if (real instanceof DevnetProvider) return real;
    return new Proxy(real, {
      get(target, name, receiver) {
        const member: unknown = Reflect.get(target, name, receiver);
        if (typeof member !== 'function' || typeof name !== 'string' || name === 'tokenAddress') return member;
        return (...callArgs: unknown[]) => {
          if (TransactionContext.getEntityManager()) calls.push(`${name}: ${new Error().stack!.split('\n').slice(2, 6).join(' <- ')}`);
          return (member as (...forwarded: unknown[]) => unknown).apply(target, callArgs);
        };
      },
    });
  };
  return { calls, stop: () => void (ChainNodes.prototype.provider = provider) };
}
