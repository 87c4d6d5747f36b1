/** Every workflow the worker runs; the bundle's entry point. */
export { idempotencyRetentionWorkflow } from './idempotency-retention';
export { webhookDeliveryWorkflow } from './webhook-delivery';
export { workflowStartSweepWorkflow } from './workflow-start-sweep';
export { pendingWorkReconcilerWorkflow } from './pending-work-reconciler';
export { policyActivationWorkflow } from './policy-activation';
export { addressBookEntryApprovalWorkflow } from './address-book-entry-approval';
export { transactionApprovalWorkflow } from './transaction-approval';
export { governanceChangeWorkflow } from './governance-change';
// Only drains the invoice workflows of invoices created before the expiry sweep (still running on a deployed system).
export { lightningInvoiceWorkflow } from './lightning-invoice';
export { lightningInvoiceExpirySweepWorkflow } from './lightning-invoice-expiry-sweep';
export { lightningPaymentWorkflow } from './lightning-payment';
export { cardProvisioningWorkflow } from './card-provisioning';
export { cardBalanceWorkflow } from './card-balance';
export { cardTerminationWorkflow } from './card-termination';
export { cardIssuerSyncWorkflow } from './card-issuer-sync';
export { chainScanWorkflow } from './scan-chain';
export { ledgerReconciliationWorkflow } from './reconcile-ledger';
export { produceDevnetBlocksWorkflow } from './produce-devnet-blocks';
export { sendTransactionWorkflow } from './send-transaction';
export { refillGasStationWorkflow } from './refill-gas-station';
export { gasStationCheckWorkflow } from './gas-station-check';
export { fundSponsorshipWorkflow } from './fund-sponsorship';
export { consolidationRunWorkflow } from './consolidation-run';
export { consolidationScheduleWorkflow } from './consolidation-schedule';
export { payoutTripWorkflow } from './payout-trip';
export { payoutRefundWorkflow } from './payout-refund';
