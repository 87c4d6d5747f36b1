import type { DecodedInvoice } from './bolt11';
import type { PaymentHashClaims } from './claims';
import { CALL_TIMEOUT_MS, hexToBase64, LndError, type LndNode } from './lnd';
import type { LightningProvider, PaymentOrder, PaymentOutcome } from './provider';

/**
 * Paying through LND (docs/lightning.md, "Paying through LND"): the preview's route query, SendPaymentV2
 * and TrackPaymentV2, and which of the node's refusals are final. The node's REST client is lnd.ts.
 */

/** LND's Payment message, the fields read here (bytes as hex, int64 as decimal strings). */
interface LndPayment {
  status: 'UNKNOWN' | 'IN_FLIGHT' | 'SUCCEEDED' | 'FAILED' | 'INITIATED';
  payment_preimage?: string;
  fee_msat?: string;
  failure_reason?: string;
}

/**
 * How long `pay` follows a payment before answering unknown (re-queried by the workflow): below the
 * activity's two minutes, above a healthy route's few seconds.
 */
const PAY_WAIT_MS = 60_000;

/** A payment hash in a path: base64url with its padding (a `/` would split the path). */
const hexToPathBase64 = (value: string) => encodeURIComponent(hexToBase64(value).replaceAll('+', '-').replaceAll('/', '_'));

/** A failed payment's reason as the node names it, `FAILURE_REASON_NO_ROUTE` → `no_route`. */
const failureReason = (reason: string | undefined) => (reason ?? 'unknown').replace(/^FAILURE_REASON_/, '').toLowerCase();

/** A final answer from LND's Payment, or unknown while it is in flight. */
function outcomeOf(payment: LndPayment): PaymentOutcome {
  if (payment.status === 'SUCCEEDED') return { state: 'succeeded', preimage: payment.payment_preimage ?? '', feeMsat: BigInt(payment.fee_msat ?? '0') };
  if (payment.status === 'FAILED') return { state: 'failed', reason: failureReason(payment.failure_reason) };
  return { state: 'unknown' };
}

/**
 * How many parts SendPaymentV2 may split a payment into (LND 0.18's own default, stated so it does not
 * depend on the node's version): an amount no single channel carries still goes, as multi-path.
 */
const MAX_PARTS = 16;

/** LND's smallest part of a multi-path payment (routing.DefaultShardMinAmt, 10,000 sats): it halves no further. */
const MIN_PART_MSAT = 10_000_000n;
/** BOLT #9 basic_mpp: a payee that takes a payment in parts. */
const [MPP_REQUIRED, MPP_OPTIONAL] = [16, 17];
/** The preview's bound on route queries for one split: a few channels tried per part size, a bounded answer time. */
const CHANNELS_PER_PART = 3;
const MAX_SPLIT_QUERIES = 32;
const NO_ROUTE = { routeFound: false, feeMsat: 0n };
/** Channels (id, msat left to send) with the most left first. */
const mostLeftFirst = ([, a]: [string, bigint], [, b]: [string, bigint]) => (a > b ? -1 : a < b ? 1 : 0);

/** ListChannels' Channel, the fields the split reads (int64 as decimal strings, absent when 0). */
interface LndChannel {
  chan_id: string;
  local_balance?: string;
  local_constraints?: { chan_reserve_sat?: string };
}

/** DecodePayReq's answer, the fields a route query takes from the invoice. */
interface LndPayReq {
  route_hints?: unknown[];
  features?: Record<string, unknown>;
}

/**
 * SendPaymentV2 refusals of the request itself, which nothing can make succeed (a retry meets the same
 * answer): nothing was sent, so the payment fails with the reason and its reserve is released. Any other
 * error (an outage, a node starting, a message not known here) is transient: retried, with a bound.
 */
const PERMANENT_REFUSALS: [RegExp, string][] = [
  [/invoice expired/i, 'invoice_expired'],
  [/cltv limit .* should be greater than|total time lock of .* exceeds max/i, 'cltv_limit_exceeded'],
  [/permission denied|verification failed|cannot get macaroon|expected 1 macaroon/i, 'permission_denied'],
  [/self-payments not allowed/i, 'self_payment'],
  [/amount must (not )?be specified|payment amount .* exceeds/i, 'invalid_amount'],
  [/invoice not for current active network|invalid (bech32|payment request|index)|checksum/i, 'invalid_payment_request'],
  [/destination doesn't support|AMP flag/i, 'unsupported_features'],
];
/** gRPC codes that say the request can never succeed as sent: InvalidArgument, PermissionDenied, Unauthenticated. */
const PERMANENT_GRPC_CODES = new Map([
  [3, 'invalid_request'],
  [7, 'permission_denied'],
  [16, 'permission_denied'],
]);

/** The reason a refusal by the node is final, or undefined when trying again might succeed. */
export function permanentRefusal(error: unknown): string | undefined {
  if (!(error instanceof LndError)) return undefined;
  return PERMANENT_REFUSALS.find(([pattern]) => pattern.test(error.message))?.[1] ?? PERMANENT_GRPC_CODES.get(error.grpcCode ?? -1);
}

/** LND answers a send of a hash it has a payment for (in flight, paid, or exists) with gRPC AlreadyExists. */
const alreadyPaying = (error: unknown) => error instanceof LndError && (error.grpcCode === 6 || /already (paid|exists)|in transition/i.test(error.message));

/**
 * The node's payment of an invoice through routes it finds itself (the invoice's route hints, up to MAX_PARTS
 * parts): the LightningProvider of an environment with LND. The node is shared by every organization, so a
 * payment sends only while it holds the claim on its hash (claims.ts): LND's answer about a hash is never
 * taken for another organization's payment.
 */
export class LndProvider implements LightningProvider {
  readonly name = 'lnd' as const;
  constructor(
    readonly node: LndNode,
    private readonly claims: PaymentHashClaims,
  ) {}

  /**
   * The route's fee as SendPaymentV2 will route (docs/lightning.md, "Paying through LND"): QueryRoutes to the
   * payee with the invoice's route hints and features (a payee behind private channels, an LSP's wallet);
   * when no single route carries the amount but our channels together do, the parts LND would split it into
   * (`inParts`). A refusal that sending would meet too (an expired invoice, a CLTV over the node's limit), or
   * too little outbound balance in all, is no route.
   */
  async estimate(invoice: DecodedInvoice, amountMsat: bigint, request: string) {
    const decoded = await this.node.call<LndPayReq>('GET', `/v1/payreq/${request.trim().toLowerCase()}`).catch((error: unknown) => {
      if (permanentRefusal(error)) return null;
      throw error;
    });
    if (!decoded) return NO_ROUTE;
    const routeFee = (partMsat: bigint, outgoingChannel?: string) => this.routeFee(invoice, decoded, partMsat, outgoingChannel);
    const whole = await routeFee(amountMsat);
    if (whole !== 'no_path') return whole === 'no_route' ? NO_ROUTE : { routeFound: true, feeMsat: whole };
    // LND splits only for a payee that takes multi-path payments (basic_mpp; the payment secret is always there).
    if (!invoice.features.some((bit) => bit === MPP_REQUIRED || bit === MPP_OPTIONAL)) return NO_ROUTE;
    const feeMsat = await this.inParts(amountMsat, routeFee);
    return feeMsat === null ? NO_ROUTE : { routeFound: true, feeMsat };
  }

  /**
   * QueryRoutes for `partMsat` (from `outgoingChannel` alone when given): the route's fee; `no_path` when the
   * node finds none although its channels hold enough in all (LND's cue to split), `no_route` when it never
   * can: too little outbound balance (from that channel), or a refusal the send would meet too.
   */
  private async routeFee(invoice: DecodedInvoice, decoded: LndPayReq, partMsat: bigint, outgoingChannel?: string): Promise<bigint | 'no_path' | 'no_route'> {
    try {
      const found = await this.node.call<{ routes?: { total_fees_msat?: string }[] }>('POST', `/v1/graph/routes/${invoice.payee}/0`, {
        amt_msat: partMsat.toString(),
        final_cltv_delta: invoice.minFinalCltvExpiry,
        route_hints: decoded.route_hints ?? [],
        dest_features: Object.keys(decoded.features ?? {}).map(Number),
        use_mission_control: true,
        ...(outgoingChannel ? { outgoing_chan_id: outgoingChannel } : {}),
      });
      const route = found.routes?.[0];
      return route ? BigInt(route.total_fees_msat ?? '0') : 'no_path';
    } catch (error) {
      // No path is an answer, and so is a refusal a send would meet; an unreachable node is not.
      if (error instanceof LndError && /unable to find a path/i.test(error.message)) return 'no_path';
      if (error instanceof LndError && (/no route|insufficient/i.test(error.message) || permanentRefusal(error))) return 'no_route';
      throw error;
    }
  }

  /**
   * The amount as SendPaymentV2 splits it when no single route carries it (LND 0.18's payment session): a
   * part is the rest, halved while no route carries it, never below MIN_PART_MSAT, at most MAX_PARTS parts.
   * Each part goes out through one of our active channels whose balance, less its reserve and the parts
   * already placed on it, can send it: QueryRoutes from that channel alone (LND's own check of the channel's
   * bandwidth, then the path to the payee). The parts' fees summed, or null when the amount does not fit.
   * The channels beyond our own are judged by their capacity alone, as a single route's are; parts that meet
   * on one of them are not added up.
   */
  private async inParts(amountMsat: bigint, routeFee: (partMsat: bigint, outgoingChannel: string) => Promise<bigint | 'no_path' | 'no_route'>): Promise<bigint | null> {
    const { channels = [] } = await this.node.call<{ channels?: LndChannel[] }>('GET', '/v1/channels?active_only=true');
    const spendable = new Map(channels.map((channel) => [channel.chan_id, (BigInt(channel.local_balance ?? '0') - BigInt(channel.local_constraints?.chan_reserve_sat ?? '0')) * 1000n]));
    // No path for the smallest part from our best channel: no split finds one either (the payee is out of reach).
    const best = [...spendable].sort(mostLeftFirst)[0];
    if (!best || best[1] < MIN_PART_MSAT || typeof (await routeFee(MIN_PART_MSAT, best[0])) !== 'bigint') return null;
    let queries = 0;
    const placed = async (partMsat: bigint) => {
      const candidates = [...spendable].filter(([, left]) => left >= partMsat).sort(mostLeftFirst);
      for (const [channel] of candidates.slice(0, CHANNELS_PER_PART)) {
        if (++queries > MAX_SPLIT_QUERIES) return null;
        const fee = await routeFee(partMsat, channel);
        if (typeof fee === 'bigint') {
          spendable.set(channel, spendable.get(channel)! - partMsat);
          return fee;
        }
      }
      return null;
    };
    let [left, feeMsat] = [amountMsat, 0n];
    for (let parts = 0; left > 0n; parts++) {
      if (parts === MAX_PARTS) return null;
      let part = left;
      let fee = await placed(part);
      // LND's last allowed part is never split further.
      while (fee === null && parts + 1 < MAX_PARTS && part / 2n >= MIN_PART_MSAT && queries < MAX_SPLIT_QUERIES) fee = await placed((part /= 2n));
      if (fee === null) return null;
      [left, feeMsat] = [left - part, feeMsat + fee];
    }
    return feeMsat;
  }

  /**
   * SendPaymentV2 with the fee limit, followed until its final state or PAY_WAIT_MS (then unknown). A
   * refusal of the request that can never succeed is the payment's failure (nothing was sent); LND keeps
   * one payment per hash, and a second send of ours (a retried activity) is answered from TrackPaymentV2.
   */
  async pay(order: PaymentOrder): Promise<PaymentOutcome> {
    if (!(await this.holdsClaim(order))) return { state: 'failed', reason: 'invoice_already_paid' };
    const body = {
      payment_request: order.request,
      fee_limit_msat: order.feeLimitMsat.toString(),
      timeout_seconds: Math.floor(PAY_WAIT_MS / 1000),
      max_parts: MAX_PARTS,
      no_inflight_updates: true,
      ...(order.invoice.amountMsat === null ? { amt_msat: order.amountMsat.toString() } : {}),
    };
    try {
      const answer = await this.node.stream<LndPayment, PaymentOutcome>('POST', '/v2/router/send', body, PAY_WAIT_MS + CALL_TIMEOUT_MS, (payment) => {
        const outcome = outcomeOf(payment);
        return outcome.state === 'unknown' ? undefined : outcome;
      });
      return answer === 'ended' ? { state: 'unknown' } : answer;
    } catch (error) {
      // This payment holds the hash's claim: the node's payment of it is this one's.
      if (alreadyPaying(error)) return this.track(order.invoice.paymentHash);
      const refusal = permanentRefusal(error);
      if (refusal) return { state: 'failed', reason: refusal };
      throw error;
    }
  }

  /** The payment's state as the node knows it; one the node never saw is sent now (the send may have been lost). */
  async query(order: PaymentOrder): Promise<PaymentOutcome> {
    const known = await this.lookup(order);
    return known.state === 'not_sent' ? this.pay(order) : known;
  }

  /** What the node says of the payment, sending nothing: its outcome (TrackPaymentV2), or not_sent when it has no payment of the hash. */
  async lookup(order: PaymentOrder): Promise<PaymentOutcome | { state: 'not_sent' }> {
    if (!(await this.holdsClaim(order))) return { state: 'failed', reason: 'invoice_already_paid' };
    try {
      return await this.track(order.invoice.paymentHash);
    } catch (error) {
      if (error instanceof LndError && /not found|isn't initiated|not initiated/i.test(error.message)) return { state: 'not_sent' };
      throw error;
    }
  }

  /** The claim is taken when the payment is created; one created before claims existed takes it here. */
  private async holdsClaim(order: PaymentOrder) {
    return this.claims(await this.node.identityPubkey(), order);
  }

  private async track(paymentHash: string): Promise<PaymentOutcome> {
    const answer = await this.node.stream<LndPayment, PaymentOutcome>('GET', `/v2/router/track/${hexToPathBase64(paymentHash)}?no_inflight_updates=true`, undefined, CALL_TIMEOUT_MS, outcomeOf);
    return answer === 'ended' ? { state: 'unknown' } : answer;
  }
}
