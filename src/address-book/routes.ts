import type { RouteRegistry } from '../http/route';
import { requestEntryApproval } from '../policies/approvals';
import { presentPendingApproval } from '../policies/presenters';
import { resolveActor } from '../policies/service';
import { listBody, paginate } from '../shared/pagination';
import { listEnvelopeSchema } from '../shared/schemas';
import { iso } from '../shared/time';
import { AddressBookEntry } from './entities';
import {
  AddressBookEntryObject,
  AddressBookEntryParams,
  AddressBookListQuery,
  CreateAddressBookEntryBody,
  DeletedAddressBookEntryObject,
  EntryApprovalBody,
  PendingEntryApprovalObject,
} from './schemas';
import { createAddressBookEntry, deleteAddressBookEntry, findAddressBookEntry, presentAddressBookEntry } from './service';

const TAG = 'Address book';

export function registerAddressBookRoutes(routes: RouteRegistry): void {
  routes.add({
    method: 'post',
    path: '/v1/address-book',
    operationId: 'createAddressBookEntry',
    summary: 'Add a named external destination',
    description:
      "The address must be one of the chain on the key's environment's network (400 on `address` otherwise); it is stored in the chain's canonical form. " +
      'One entry per chain and address in an environment: a second is 409 `address_book_entry_exists` with details.address_book_entry_id. ' +
      'Consolidation rules sweep to entries; whitelist policies name them (operators in_address_book, not_in_address_book). ' +
      "Both count the entry from usable_at: created_at plus the organization's cooling period (default 24 h live, 0 sandbox), or earlier by approval. See docs/address-book.md.",
    tag: TAG,
    scope: 'custody:write',
    body: CreateAddressBookEntryBody,
    response: { status: 201, description: 'The entry', schema: AddressBookEntryObject },
    handler: async ({ auth, em, body }) => ({ status: 201, body: presentAddressBookEntry(await createAddressBookEntry(em, auth, body)) }),
  });

  routes.add({
    method: 'get',
    path: '/v1/address-book',
    operationId: 'listAddressBookEntries',
    summary: 'List address book entries',
    description: "The environment's entries, newest first; `?chain=` keeps one chain's.",
    tag: TAG,
    scope: 'custody:read',
    query: AddressBookListQuery,
    response: { status: 200, description: 'A page of entries', schema: listEnvelopeSchema(AddressBookEntryObject) },
    handler: async ({ auth, em, query }) => {
      const where = { organization: auth.organizationId, environment: auth.environment, ...(query.chain ? { chain: query.chain } : {}) };
      return { body: listBody(await paginate(em, AddressBookEntry, where, query), presentAddressBookEntry) };
    },
  });

  routes.add({
    method: 'get',
    path: '/v1/address-book/:id',
    operationId: 'getAddressBookEntry',
    summary: 'Get an address book entry',
    tag: TAG,
    scope: 'custody:read',
    params: AddressBookEntryParams,
    response: { status: 200, description: 'The entry', schema: AddressBookEntryObject },
    handler: async ({ auth, em, params }) => ({ body: presentAddressBookEntry(await findAddressBookEntry(em, auth, params.id)) }),
  });

  routes.add({
    method: 'post',
    path: '/v1/address-book/:id/approval-requests',
    operationId: 'requestAddressBookEntryApproval',
    summary: 'Ask to use an entry before its cooling period ends: 202 pending approvals, or 200 the usable entry',
    description:
      "Under the organization's policy activation quorum (policy_activation_required_approvals; votes by owners, admins and approvers other than the requester, " +
      'through POST /v1/approval-requests/{id}/approve or reject, until expires_at). Approved: usable_at becomes the time of the deciding vote. ' +
      'With no approvals required the entry is usable at once (200); an entry already usable answers 200 unchanged. One pending request per entry: ' +
      'a second is 409 `approval_pending` with details.approval_request_id; too few members who could vote: 409 `not_enough_approvers`.',
    tag: TAG,
    scope: 'custody:write',
    params: AddressBookEntryParams,
    body: EntryApprovalBody,
    response: { status: 202, description: 'Pending approval response (200 with the entry when it is usable)', schema: PendingEntryApprovalObject },
    otherResponses: [{ status: 200, description: 'The entry, usable now', schema: AddressBookEntryObject }],
    handler: async ({ auth, em, deps, params, body }) => {
      const outcome = await requestEntryApproval(em, await resolveActor(em, auth), params.id, {
        comment: body.comment,
        expiryHours: body.expiry_hours ?? deps.config.POLICY_ACTIVATION_EXPIRY_HOURS,
      });
      if (outcome.status === 'usable') return { status: 200, body: presentAddressBookEntry(outcome.entry) };
      const { request } = outcome;
      return {
        status: 202,
        body: {
          address_book_entry_id: params.id,
          usable_at: iso(request.addressBookEntry!.usableAt),
          ...presentPendingApproval(request, 'Early use', 'poll the entry until usable_at has passed'),
        },
      };
    },
  });

  routes.add({
    method: 'delete',
    path: '/v1/address-book/:id',
    operationId: 'deleteAddressBookEntry',
    summary: 'Delete an address book entry',
    description:
      'Answers the deleted entry. An entry a consolidation rule sweeps to (a rule not deleted, or a deleted one whose run is still going) is 409 ' +
      '`address_book_entry_in_use` with details.rule_ids, and stays. Policies naming it stop matching it at once.',
    tag: TAG,
    scope: 'custody:write',
    params: AddressBookEntryParams,
    response: { status: 200, description: 'The deleted entry', schema: DeletedAddressBookEntryObject },
    handler: async ({ auth, em, params }) => ({ body: { ...presentAddressBookEntry(await deleteAddressBookEntry(em, auth, params.id)), deleted: true as const } }),
  });
}
