import type { EntityManager } from '@mikro-orm/postgresql';
import type { PayoutInstruction, PayoutRail, RailAnswer } from '../rails';
import { SandboxRailBook } from './sandbox-rail-book';

/** The sandbox's bank transfer rail: answers what the trip's sandbox outcome says. */
export class SandboxBankRail implements PayoutRail {
  readonly name = 'sandbox_bank';
  private readonly book = new SandboxRailBook('beneficiary_account_invalid', 'compliance_screening_match');

  submit(em: EntityManager, instruction: PayoutInstruction): Promise<RailAnswer> {
    if (instruction.beneficiary.type !== 'bank') throw new Error(`the bank rail pays bank accounts, not ${instruction.beneficiary.type}`);
    // As a bank would: a masked (or sealed) account number pays no one.
    if (!/^\d+$/.test(instruction.beneficiary.accountNumber)) throw new Error('the bank rail needs the whole account number, digits only');
    return this.book.submit(em, instruction);
  }

  status(em: EntityManager, tripId: string): Promise<RailAnswer | null> {
    return this.book.status(em, tripId);
  }
}
