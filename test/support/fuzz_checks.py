"""Schemathesis hooks for `npm run fuzz` (test/fuzz.test.ts loads this file through SCHEMATHESIS_HOOKS).

`positive_data_accepted` is schemathesis' `positive_data_acceptance` (a request the document allows must
not be refused) read with the API's own error codes: `validation_failed` says a request is malformed,
which a request the document allows must never be; a named code (`insufficient_funds`,
`invalid_payment_request`, `endpoint_removed`...) refuses a well-formed request by a business rule
(src/shared/errors.ts), which the document cannot foresee. A few `validation_failed` refusals depend on
what no schema can say (docs/fuzzing.md, "Where the document says what the services refuse"): a NUL
or a lone surrogate in any string, and the rules listed below by operation and parameter. Anything
else is a find.
"""

import json
from collections.abc import Mapping

import schemathesis
from schemathesis.specs.openapi.checks import positive_data_acceptance

# (operation, param of the refusal) -> why the document cannot say it.
BEYOND_THE_DOCUMENT = {
    # An opaque token: only the `next_cursor` of a previous page is one.
    ("*", "cursor"): "a cursor the service issued",
    ("POST /v1/address-book", "address"): "the address's checksum and the key's network",
    ("POST /v1/sandbox/deposits", "address"): "the address's checksum and the key's network",
    ("POST /v1/subscriptions", "address"): "the address's checksum and the key's network",
    ("POST /api/lightning/payments", "amount"): "equal to the invoice's own amount",
    ("POST /api/lightning/payments/initiate", "amount"): "equal to the invoice's own amount",
    ("POST /payouts/quotes", "amountCurrency"): "the asset sent or the currency paid out of this quote",
    ("POST /v1/policies/{id}/simulate", "to"): "after `from`, at most 90 days",
    ("POST /v1/policies/{id}/simulate", "history.to"): "after `from`, at most 90 days",
    ("POST /v1/transactions", "asset"): "an asset of the wallet's chain",
    ("POST /v1/transactions/estimate-fee", "asset"): "an asset of the wallet's chain",
    ("POST /api/cards", "customer.date_of_birth"): "a real date, in the past",
    ("POST /api/cards", "customer.id_number"): "the format of its id_type (and country)",
    ("POST /v1/policies", "name"): "required unless a template or a source policy gives one",
    ("PATCH /v1/policies/{id}/rules/{ruleId}", "action_config"): "the shape of the stored rule's action type",
    ("PATCH /v1/gas-stations/{id}", "refill_amount"): "set when auto refill is on, here or in the stored station; at most the stored chain's native decimals",
    # An amount has at most its asset's decimals (BTC 8, ETH 18, TRX 6, SOL 9, USDC 6...): the asset is another field,
    # the wallet's or the stored station's. The bodies do not branch on the chain (the deposits' per chain objects
    # hold assets of several decimals), so the document gives the amount's pattern and leaves this rule here.
    ("POST /v1/gas-stations", "threshold"): "at most the chain's native decimals",
    ("POST /v1/gas-stations", "refill_amount"): "at most the chain's native decimals",
    ("POST /v1/gas-stations", "daily_sponsorship_budget"): "at most the chain's native decimals",
    ("PATCH /v1/gas-stations/{id}", "threshold"): "at most the stored chain's native decimals",
    ("PATCH /v1/gas-stations/{id}", "daily_sponsorship_budget"): "at most the stored chain's native decimals",
    ("POST /v1/gas-stations/{id}/refill", "amount"): "at most the station's chain's native decimals",
    ("POST /v1/sandbox/deposits", "amount"): "at most the asset's decimals",
    ("POST /v1/transactions", "amount"): "at most the asset's decimals",
    ("POST /v1/transactions/estimate-fee", "amount"): "at most the asset's decimals",
    ("POST /payouts/quotes", "amount"): "at most the decimals of the asset or currency amountCurrency names",
    ("POST /v1/gas-stations/sponsor-broadcast", "asset"): "an asset of the network's chain",
    ("POST /v1/gas-stations/sponsor-broadcast", "to_address"): "an address of the network's chain (Ethereum or Tron)",
    ("POST /v1/gas-stations/sponsor-broadcast", "from_address"): "an address of the network's chain (Ethereum or Tron)",
    ("POST /v1/policies", "source_policy_id"): "template_id or source_policy_id, not both",
    ("POST /v1/wallets/{id}/sign", "hash_function"): "one that fits the wallet's key (secp256k1 or ed25519)",
    ("POST /v1/wallets/{id}/sign", "payload"): "hexadecimal unless `payload_encoding` is text_utf8",
    # Left a plain string on purpose: a URL pattern would send the fuzzer to public host names.
    ("POST /v1/webhooks", "url"): "an absolute URL",
    ("PATCH /v1/webhooks/{id}", "url"): "an absolute URL",
    ("POST /v1/subscriptions", "webhook_url"): "an absolute URL",
}


def _unstorable(value):
    """Whether generated data carries a NUL or a lone surrogate, which the service refuses in any string
    (test/api/bad-input.test.ts) and which no schema of the document says."""
    if isinstance(value, str):
        return any(char == "\0" or "\ud800" <= char <= "\udfff" for char in value)
    if isinstance(value, Mapping):
        return any(_unstorable(key) or _unstorable(item) for key, item in value.items())
    if isinstance(value, (list, tuple)):
        return any(_unstorable(item) for item in value)
    return False


def _refusal(response):
    try:
        error = json.loads(response.content).get("error") or {}
    except (ValueError, AttributeError):
        return None, None
    return error.get("code"), error.get("param")


@schemathesis.check
def positive_data_accepted(ctx, response, case):
    code, param = _refusal(response)
    if 400 <= response.status_code < 500 and code and code != "validation_failed":
        return None
    if code == "validation_failed" and _unstorable([case.body, case.query, case.path_parameters, case.headers]):
        return None
    if code == "validation_failed" and ((case.operation.label, param) in BEYOND_THE_DOCUMENT or ("*", param) in BEYOND_THE_DOCUMENT):
        return None
    return positive_data_acceptance(ctx, response, case)
