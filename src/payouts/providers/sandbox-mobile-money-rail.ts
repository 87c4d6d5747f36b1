import type { EntityManager } from '@mikro-orm/postgresql';
import type { PayoutInstruction, PayoutRail, RailAnswer } from '../rails';
import { SandboxRailBook } from './sandbox-rail-book';

/** The sandbox's mobile-money rail (M-Pesa, MTN MoMo and the like): answers what the trip's sandbox outcome says. */
export class SandboxMobileMoneyRail implements PayoutRail {
  readonly name = 'sandbox_mobile_money';
  private readonly book = new SandboxRailBook('mobile_wallet_unreachable', 'risk_check_declined');

  submit(em: EntityManager, instruction: PayoutInstruction): Promise<RailAnswer> {
    if (instruction.beneficiary.type !== 'mobile_money') throw new Error(`the mobile-money rail pays mobile wallets, not ${instruction.beneficiary.type}`);
    // As a mobile-money network would: a masked (or sealed) phone number reaches no wallet.
    if (!/^\+\d+$/.test(instruction.beneficiary.phoneNumber)) throw new Error('the mobile-money rail needs the whole E.164 phone number');
    return this.book.submit(em, instruction);
  }

  status(em: EntityManager, tripId: string): Promise<RailAnswer | null> {
    return this.book.status(em, tripId);
  }
}
