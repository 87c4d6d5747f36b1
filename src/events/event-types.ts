/**
 * Every event type the service emits, with a one-line description: the single source of truth
 * behind `GET /v1/webhooks/event-types` and the validation of `event_types` filters. A domain
 * that starts emitting a new type adds it here.
 */
export const EVENT_TYPES = [
  { type: 'webhook.test', description: 'A test event sent to one endpoint by POST /v1/webhooks/:id/test.' },
  {
    type: 'webhook_endpoint.disabled',
    description: 'A webhook endpoint that kept failing was disabled automatically; sent to the organization\'s other endpoints. data.webhook_id names it.',
  },
  { type: 'transaction.created', description: 'A send was accepted: funds locked, its workflow started.' },
  { type: 'transaction.broadcast', description: 'A send was signed and a node accepted it.' },
  { type: 'transaction.confirmed', description: "A send reached the chain's confirmation count and was settled." },
  { type: 'transaction.failed', description: 'A send provably did not reach the chain (its lock released), or was mined and reverted (its fee paid).' },
  {
    type: 'transaction.mined_after_failure',
    description:
      'An alarm: a send that had failed (its lock released) was mined after all. The wallet was debited what the chain shows and the send is confirmed with mined_after_failure_at; data is the transaction with its earlier failure and the debits.',
  },
  {
    type: 'transaction.reorged',
    description:
      "A settled send's block was abandoned by a reorganisation deeper than its confirmation count: block_height is null and what it paid out (amount and fee) is held in the ledger's suspense until the chain mines it again, when transaction.confirmed (or .failed) is sent again for the new block.",
  },
  { type: 'transfer.success', description: 'A stablecoin transfer succeeded; data carries transaction_id.' },
  { type: 'deposit.success', description: 'A stablecoin deposit was credited to a wallet.' },
  {
    type: 'deposit.reversed',
    description:
      "A confirmed deposit was in blocks a reorganisation abandoned: its credit was taken off the wallet balance into the ledger's suspense and the deposit is dropped (credited again, and its suspense cleared, when the chain mines it again). Where the wallet had already spent it, a ledger.drift of figure overdrawn is raised too.",
  },
  {
    type: 'deposit.reversal_final',
    description:
      "A reversed deposit can never be mined again: the account that signed its transaction had another transaction mined with its nonce, and that has held for the chain's confirmation count of blocks. What waited in the ledger's suspense for it is written off to the outside world (it was never paid); data is the deposit with lost_at.",
  },
  { type: 'incoming_token_tx', description: 'An incoming token transfer to a subscribed address.' },
  { type: 'incoming_native_tx', description: 'An incoming native-coin transfer to a subscribed address.' },
  { type: 'outgoing_token_tx', description: "A token transfer out of one of the organization's addresses, its own sends included; to its endpoints and the subscriptions watching the address." },
  { type: 'outgoing_native_tx', description: "A native-coin transfer out of one of the organization's addresses, its own sends included; to its endpoints and the subscriptions watching the address." },
  { type: 'wallet.unexpected_spend', description: 'A transaction the platform did not make spent from a wallet: the ledger was debited what the chain says left it (amounts and fee).' },
  {
    type: 'wallet.unexpected_spend_returned',
    description:
      "A spend the platform did not make, taken off the chain by a reorganisation, can never be mined again (its signer had another transaction mined with its nonce, for the chain's confirmation count of blocks): what it had debited (data.returned, per asset) is back in the wallet, out of the ledger's suspense.",
  },
  {
    type: 'ledger.drift',
    description:
      "The ledger reconciliation, at the block its chain's scanner had read, found a figure of what the custody ledger says an address holds (a wallet, on Bitcoin) differ: data.figure balance (compared with the node at that block), locked (with what the sends in flight lock) or pending (with the deposits seen and not confirmed), with both amounts; on Bitcoin also utxo_set: the outputs the platform's UTXO table says the wallet holds unspent (ledger_amount) against what the node holds of them at that block (chain_amount); or a reorganisation reversed a deposit the wallet had already spent: figure overdrawn, the available balance below zero (chain_amount 0), resolved once it is back to zero or more. status open when found; credited when the chain held more on an account chain and, once the block it was first seen at was final and netted against what the wallet's other addresses lack, credited_amount was credited as an unattributed deposit (announced a second time); open ones are left for an operator.",
  },
  {
    type: 'ledger.invariant_broken',
    description:
      "The ledger's invariant check found the organization's books broken: a posting that does not balance, or a balance row that differs from the sum of its ledger accounts or is negative. data.breaks lists each with the ledger's figures and what was found; raised once per distinct finding.",
  },
  { type: 'gas_station.low_balance', description: 'A gas station balance fell below its threshold.' },
  { type: 'gas_station.refilled', description: 'A gas station was refilled.' },
  { type: 'gas_station.refill_failed', description: 'A gas station refill failed on every attempt of its retry policy; data.failure says why.' },
  {
    type: 'sponsor_broadcast.failed',
    description:
      "A sponsored broadcast failed (data: the Sponsor broadcast response, budget_charge_raw and budget_charge_usd, what its budgets were charged). failure_reason nonce_spent: the sender spent the transaction's nonce after its fuel arrived; nothing was relayed and the fuel, at the sender's address, stays charged.",
  },
  { type: 'policy.alert', description: 'A policy rule with action alert matched an operation.' },
  { type: 'policy.activation_requested', description: 'A policy activation is waiting for approvals.' },
  { type: 'policy.activated', description: 'A policy reached the enforced state.' },
  { type: 'policy.activation_rejected', description: 'An approver rejected a policy activation; the policy stays draft.' },
  { type: 'policy.activation_expired', description: 'A policy activation lapsed before enough approvals; the policy stays draft.' },
  {
    type: 'policy.change_requested',
    description:
      'A loosening change to a control (archiving an enforced policy, raising a gas station\'s limits, fewer approvals, a shorter cooling period, a new approver) waits for approvals; data names the change (governance_change_id, kind, subject, change) and its approval request.',
  },
  { type: 'policy.archived', description: 'An enforced policy was archived (its change request approved, or no approvals required); data names the governance change.' },
  { type: 'policy.changed', description: "A control changed: a gas station's limits, the approval count, the cooling period or a new approver; data names the governance change (kind, subject, change)." },
  { type: 'approval_request.created', description: "An approval request opened: a policy activation, an address-book entry's early use or a send a require_approval rule held waits for approvals; data is the approval request (kind says which)." },
  { type: 'approval_request.approved', description: 'An approval request reached its approvals and what it approves was carried out; data is the approval request.' },
  { type: 'approval_request.rejected', description: 'An approver rejected an approval request; nothing it asked for happens. data is the approval request.' },
  { type: 'approval_request.expired', description: 'An approval request lapsed at expires_at (or an approved send went unused until then); data is the approval request.' },
  { type: 'automation.paused', description: "An automation stopped because the key it acts for was revoked: data.automation_type (gas_station, consolidation_rule or fee_bump), automation_id and revoked_api_key_id. It moves no value until a key takes it over." },
  { type: 'automation.resumed', description: 'A key took over a paused automation, which acts for it from now on: data.automation_type, automation_id, api_key_id and previous_api_key_id.' },
  { type: 'consolidation.run.started', description: 'A consolidation run began scanning its vault.' },
  { type: 'consolidation.run.completed', description: 'A consolidation run finished with every sweep confirmed (or nothing to sweep).' },
  { type: 'consolidation.run.failed', description: 'A consolidation run ended with failed sweeps (status partially_failed or failed), or could not proceed.' },
  { type: 'consolidation.sweep.failed', description: 'A consolidation sweep failed: its send was refused or never reached the chain; data.failure_reason says why.' },
  { type: 'card.created', description: 'A card was requested and is being provisioned.' },
  { type: 'card.ready', description: 'A card finished provisioning: status active, masked_pan populated.' },
  { type: 'card.provisioning_failed', description: 'The issuer refused to provision a card: status failed, initial funding released.' },
  { type: 'card.frozen', description: 'A card was frozen.' },
  { type: 'card.unfrozen', description: 'A frozen card was made active again.' },
  { type: 'card.terminated', description: 'A card was terminated and its balance returned.' },
  { type: 'card.transaction.completed', description: "A card funding or withdrawal settled, or the live issuer moved a card's money after a purchase (reversal, capture_adjustment, refund)." },
  { type: 'card.transaction.failed', description: 'A card funding or withdrawal failed.' },
  { type: 'card.authorization', description: 'A merchant authorization was approved or declined.' },
  { type: 'card_issuer.drift', description: "The Stripe Issuing reconciliation found an authorization on one of the organization's live cards where Stripe holds another amount than the card is charged (an event never received, a decision not followed): data is the drift (subject, authorization_id, card_id, our_amount, issuer_amount in cents, status)." },
  { type: 'card.issuer_sync_failed', description: "The live issuer (Stripe) refused a live card's status or spending controls: data.card_id, status, failure_reason, failed_at. Not retried; our own authorization decisions stay authoritative." },
  { type: 'lightning.invoice.paid', description: 'A Lightning invoice was paid.' },
  { type: 'lightning.invoice.expired', description: 'A Lightning invoice expired unpaid.' },
  { type: 'lightning.payment.succeeded', description: 'An outgoing Lightning payment settled.' },
  { type: 'lightning.payment.failed', description: 'An outgoing Lightning payment failed.' },
  { type: 'asset.received', description: 'Payout funding detected on the deposit address.' },
  { type: 'payouts.processing', description: 'A payout is processing (fiat amount pro-rated on underpayment).' },
  { type: 'payouts.withdrawal.success', description: 'A payout was delivered to the beneficiary.' },
  { type: 'payouts.withdrawal.failed', description: 'A payout was rejected at delivery or blocked by compliance or risk.' },
  { type: 'payouts.withdrawal.expired', description: 'A payout quote expired with no payment detected; the payout was cancelled.' },
  { type: 'payouts.refund.refunded', description: "A payout's refund settled on chain at the refund address." },
  { type: 'payouts.refund.failed', description: "A payout's refund could not be made; its money is held for an operator." },
  { type: 'withdrawal.processing', description: 'Payout stage: the withdrawal to the rail started.' },
  { type: 'withdrawal.success', description: 'Payout stage: the withdrawal to the rail succeeded.' },
  { type: 'withdrawal.failed', description: 'Payout stage: the withdrawal to the rail failed.' },
] as const satisfies readonly { type: string; description: string }[];

export type EventType = (typeof EVENT_TYPES)[number]['type'];

const KNOWN = new Set<string>(EVENT_TYPES.map((entry) => entry.type));
export const isEventType = (value: string): value is EventType => KNOWN.has(value);

/** On-chain types a subscription can filter on. */
export const ON_CHAIN_EVENT_TYPES = ['incoming_token_tx', 'incoming_native_tx', 'outgoing_token_tx', 'outgoing_native_tx'] as const satisfies readonly EventType[];
