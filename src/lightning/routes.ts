import type { z } from 'zod';
import { errors } from '../shared/errors';
import type { RouteRegistry } from '../http/route';
import { resultEnvelope } from '../shared/schemas';
import {
  CreateInvoiceBody,
  CreatedInvoice,
  DecodeBody,
  DecodedRequest,
  InvoiceEnvelope,
  InvoiceIdParams,
  InvoiceListEnvelope,
  ListInvoicesQuery,
  PayBody,
  PaymentEnvelope,
  PaymentPreview,
  PreviewBody,
  SandboxInvoice,
  SandboxInvoiceBody,
} from './schemas';
import { issueSandboxInvoice } from './sandbox-network';
import { presentCreatedInvoice, presentDecoded, presentInvoice, presentPayment } from './presenters';
import { answeredByNode, configuredLightningNodes } from './lnd';
import { createInvoice, settleIncomingInvoice, type NewInvoice } from './invoices';
import { createPayment, decodePaymentRequest, preparePayment, previewPayment, type NewPayment } from './payments';
import { findRecord, listRecords, readRecord } from './service';

/** What the invoice, preview and payment routes say about the environment's node. */
const THROUGH_THE_NODE =
  'With an LND node configured for the environment it goes through that node; a live key with none gets 503 `lightning_node_unavailable`. See docs/lightning.md.';

export function registerLightningRoutes(routes: RouteRegistry): void {
  const tag = 'Lightning';

  routes.add({
    method: 'post',
    path: '/api/lightning/invoices',
    operationId: 'createLightningInvoice',
    summary: 'Create a BOLT11 invoice (the same reference returns the original invoice; with other parameters it is 409)',
    description: THROUGH_THE_NODE,
    tag,
    scope: 'lightning:write',
    body: CreateInvoiceBody,
    response: { status: 201, description: 'The invoice', schema: CreatedInvoice },
    // One insert records it, and its reference makes a repeat return the original: no transaction is opened.
    // Live without a node is 503 lightning_node_unavailable.
    ownTransactions: true,
    handler: async ({ auth, body, em, deps }) => {
      const invoice = await answeredByNode(() => createInvoice(em, deps.keys, auth, newInvoice(body), configuredLightningNodes(deps.config)));
      return { status: 201, body: presentCreatedInvoice(invoice) };
    },
  });

  routes.add({
    method: 'get',
    path: '/api/lightning/invoices',
    operationId: 'listLightningInvoices',
    summary: 'List invoices and payments (page, page_size, status, direction)',
    tag,
    scope: 'lightning:read',
    query: ListInvoicesQuery,
    response: { status: 200, description: 'One page', schema: InvoiceListEnvelope },
    handler: async ({ auth, query, em, ctx }) => {
      const { records, total } = await listRecords(em, auth, query);
      return {
        body: resultEnvelope(ctx.state.requestId, 'Invoices retrieved', {
          invoices: records.map(presentInvoice),
          total_count: String(total),
          page: query.page,
          page_size: query.page_size,
        }),
      };
    },
  });

  routes.add({
    method: 'get',
    path: '/api/lightning/invoices/:id',
    operationId: 'getLightningInvoice',
    summary: 'Get one invoice',
    tag,
    scope: 'lightning:read',
    params: InvoiceIdParams,
    response: { status: 200, description: 'The invoice', schema: InvoiceEnvelope },
    handler: async ({ auth, params, deps, ctx }) => ({
      body: resultEnvelope(ctx.state.requestId, 'Invoice retrieved', presentInvoice(await readRecord(deps.orm.em, auth, params.id))),
    }),
  });

  routes.add({
    method: 'post',
    path: '/api/lightning/decode',
    operationId: 'decodeLightningRequest',
    summary: 'Decode a BOLT11 payment request (signature checked, payee recovered); no funds move',
    tag,
    scope: ['lightning:read', 'lightning:write'],
    body: DecodeBody,
    response: { status: 200, description: 'The decoded request', schema: DecodedRequest },
    handler: async ({ body }) => ({ body: presentDecoded(decodePaymentRequest(body.request)) }),
  });

  routes.add({
    method: 'post',
    path: '/api/lightning/payments/initiate',
    operationId: 'previewLightningPayment',
    summary: 'Preview a payment: fee estimate, total, expiry, route_found',
    description: THROUGH_THE_NODE,
    tag,
    scope: 'lightning:write',
    body: PreviewBody,
    response: { status: 200, description: 'The preview', schema: PaymentPreview },
    // It only reads, LND's route among others: no transaction is held while the node answers.
    ownTransactions: true,
    handler: async ({ auth, body, em, deps }) => {
      const { estimate, ...preview } = await answeredByNode(() => previewPayment(em, auth, body.request, body.amount, configuredLightningNodes(deps.config)));
      void estimate;
      return { body: preview };
    },
  });

  routes.add({
    method: 'post',
    path: '/api/lightning/payments',
    operationId: 'payLightningInvoice',
    summary: 'Pay a BOLT11 invoice (the same reference returns the original payment, never debits twice; with other parameters it is 409)',
    description: THROUGH_THE_NODE,
    tag,
    scope: 'lightning:write',
    body: PayBody,
    response: { status: 201, description: 'The payment (pending until its workflow settles it)', schema: PaymentEnvelope },
    // The route and its fee come from the node before the transaction opens.
    prepare: ({ auth, body, em, deps }) => answeredByNode(() => preparePayment(em, auth, newPayment(body), configuredLightningNodes(deps.config))),
    handler: async ({ auth, body, em, ctx, deps, prepared }) => {
      const payment = await createPayment(em, deps.config, auth, newPayment(body), configuredLightningNodes(deps.config), prepared);
      return { status: 201, body: resultEnvelope(ctx.state.requestId, 'Payment initiated', presentPayment(payment)) };
    },
  });

  routes.add({
    method: 'get',
    path: '/api/lightning/payments/:id',
    operationId: 'getLightningPayment',
    summary: 'Get an outgoing payment',
    tag,
    scope: 'lightning:read',
    params: InvoiceIdParams,
    response: { status: 200, description: 'The payment', schema: PaymentEnvelope },
    handler: async ({ auth, params, deps, ctx }) => ({
      body: resultEnvelope(ctx.state.requestId, 'Payment retrieved', presentPayment(await readRecord(deps.orm.em, auth, params.id, 'outgoing', 'lightning payment'))),
    }),
  });

  routes.add({
    method: 'post',
    path: '/v1/sandbox/lightning/invoices',
    operationId: 'sandboxRemoteLightningInvoice',
    summary: 'Sandbox: an invoice from a simulated remote node (its behaviour chosen by `node`), to pay',
    tag: 'Sandbox',
    scope: 'lightning:write',
    sandboxOnly: true,
    body: SandboxInvoiceBody,
    response: { status: 201, description: 'The remote invoice', schema: SandboxInvoice },
    handler: async ({ body }) => {
      const issued = issueSandboxInvoice({ node: body.node, amountSat: body.amount ?? null, description: body.description, expirySeconds: body.expiry, now: new Date() });
      return { status: 201, body: { object: 'sandbox_lightning_invoice', node: body.node, destination: issued.destination, payment_hash: issued.paymentHash, request: issued.request } };
    },
  });

  routes.add({
    method: 'post',
    path: '/v1/sandbox/lightning/invoices/:id/pay',
    operationId: 'sandboxPayLightningInvoice',
    summary: 'Sandbox: a remote payer pays one of our invoices',
    tag: 'Sandbox',
    scope: 'lightning:write',
    sandboxOnly: true,
    params: InvoiceIdParams,
    response: { status: 200, description: 'The invoice after payment', schema: InvoiceEnvelope },
    handler: async ({ auth, params, em, ctx }) => {
      // Only the sandbox key's own sandbox invoices: a live invoice's id is 404 here, as another organization's is.
      const invoice = await findRecord(em, auth, params.id, 'incoming');
      const { outcome } = await settleIncomingInvoice(em, {
        invoiceId: invoice.id,
        paymentHash: invoice.paymentHash,
        environment: invoice.environment,
        amountMsat: BigInt(invoice.amountMsat),
        paidByPaymentId: null,
      });
      if (outcome.state !== 'succeeded') {
        throw errors.conflict(outcome.state === 'failed' ? outcome.reason : 'invoice_not_payable', `The invoice cannot be paid (${presentInvoice(invoice).status}).`);
      }
      await em.refresh(invoice);
      return { body: resultEnvelope(ctx.state.requestId, 'Invoice paid', presentInvoice(invoice)) };
    },
  });
}

const newInvoice = (body: z.infer<typeof CreateInvoiceBody>): NewInvoice => ({
  amountSat: body.amount,
  description: body.description,
  expirySeconds: body.expiry,
  reference: body.reference,
  customerId: body.customer_id,
});

const newPayment = (body: z.infer<typeof PayBody>): NewPayment => ({
  request: body.request,
  reference: body.reference,
  customerId: body.customer_id,
  maxFeeSat: body.max_fee,
  amountSat: body.amount,
});
