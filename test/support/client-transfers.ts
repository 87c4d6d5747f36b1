import { randomUUID } from 'node:crypto';
import { secp256k1 } from '@noble/curves/secp256k1';
import { assetById } from '../../src/catalogue/service';
import type { ChainProvider } from '../../src/chains/provider';
import { signTransfer, type TransferToSign } from '../../src/chains/transfers';
import { erc20TransferData } from '../../src/chains/transfers/ethereum';
import { secp256k1Address } from '../../src/keys/derivation';
import { quoteFee } from '../../src/transactions/estimate';

/** What sponsor-broadcast is given: transactions signed outside the platform, by a client's own key. */

export type ClientChain = 'ethereum' | 'tron';

export interface ClientKey {
  address: string;
  publicKey: Uint8Array;
  privateKey: Uint8Array;
}

/** A fresh key outside the platform, with its sandbox address. */
export function clientKey(chain: ClientChain): ClientKey {
  const privateKey = secp256k1.utils.randomPrivateKey();
  const publicKey = secp256k1.getPublicKey(privateKey, true);
  const format = chain === 'tron' ? 'base58check' : 'eip55';
  return { address: secp256k1Address({ chain, testnet: true, format }, publicKey), publicKey, privateKey };
}

/** What a client may sign otherwise than a careful one: on Ethereum a nonce, a gas limit or a max fee per gas of its own; on Tron a fee_limit. */
export interface ClientSigning {
  nonce?: bigint;
  gasLimit?: bigint;
  maxFeePerGas?: bigint;
  feeLimit?: bigint;
}

/**
 * The client's transfer of `amount` of `assetId` to `to`, signed by `client` at the medium level:
 * on Tron a TRC-20 transfer whose fee_limit is the market's fee, on Ethereum its exact gas at one
 * fixed price, nonce 0, unless `signing` says otherwise. `maxFee` is the most it can cost the client,
 * what a sponsor funds.
 */
export async function signClientTransfer(node: ChainProvider, chain: ClientChain, client: ClientKey, to: string, assetId: string, amount: bigint, signing: ClientSigning = {}) {
  const asset = assetById(assetId);
  const token = asset.type === 'native' ? undefined : node.tokenAddress(assetId);
  const base = { chain, testnet: true, from: client.address, to, assetId, amount, reference: randomUUID(), ...(token ? { tokenAddress: token } : {}) };
  if (chain === 'tron') {
    const fee = signing.feeLimit ?? quoteFee(await node.feeMarket(), asset, 'medium', null).fee;
    const transfer: TransferToSign = { ...base, fee: { model: 'flat', fee }, recentBlock: await node.recentBlock!() };
    return { ...signTransfer(transfer, [client]), maxFee: fee };
  }
  const market = await node.feeMarket();
  if (market.model !== 'eip1559') throw new Error('expected an EIP-1559 fee market');
  const price = signing.maxFeePerGas ?? 2n * market.baseFeePerGas + market.priorityFeePerGas.medium;
  const gas = signing.gasLimit ?? (await node.estimateGas!(token ? { from: client.address, to: token, data: erc20TransferData(to, amount) } : { from: client.address, to, value: amount }));
  const transfer: TransferToSign = {
    ...base,
    fee: { model: 'eip1559', gasLimit: gas, maxFeePerGas: price, maxPriorityFeePerGas: price },
    ethereum: { chainId: (await node.identifyNetwork()).chainId!, nonce: signing.nonce ?? 0n },
  };
  return { ...signTransfer(transfer, [client]), maxFee: gas * price };
}
