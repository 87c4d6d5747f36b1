import type { Orm } from '../src/db/orm';
import { inProcessSigner } from '../src/custody/signer';
import type { KeyService } from '../src/keys/service';

export interface CustodyActivityDeps {
  orm: Orm;
  /** The worker's: it holds the seed role. */
  keys: KeyService;
}

/** The signer's activities (src/custody/flows/signer.ts): each opens a seed in the worker, and returns only public data. */
export const createCustodyActivities = (deps: CustodyActivityDeps) => {
  const signer = inProcessSigner(deps.orm, deps.keys);
  return { storeSeedPublicKeys: signer.storePublicKeys, signWithAddressKey: signer.sign };
};
