"""schemathesis hooks for the Mailwright fuzz run (loaded by test/fuzz/schemathesis.toml).

One thing only: `positive_data_acceptance` (ST202, "schema-valid request rejected") keeps running on every operation,
but a refusal listed in REFUSED_BY_DESIGN below does not count as a failure. Each entry is a refusal the OpenAPI
document cannot express as a schema (server state, a relation between two parameters, file contents, a rule on every
string and key), names the operation, the status and the error codes, and says why. Whatever the document can state,
it states (patterns for cursors, date-times, emails, names), so it needs no entry here. To see every refusal, run
the fuzz test with MAILWRIGHT_FUZZ_NO_HOOKS=1 and read its report with scripts/fuzz/rejected.ts. A 422 counts as
"by design" only when every one of its field errors has a listed code: a response that also reports anything else is
still a failure.
"""

from __future__ import annotations

import json
import re
from typing import Any
from urllib.parse import unquote, urlsplit

import jsonschema_rs
from schemathesis.checks import CHECKS, load_all_checks
from schemathesis.openapi.checks import RejectedPositiveData

ANY = "*"

# Field-error codes of the filter validator that the Filter component's shape does not express.
FILTER_SEMANTICS = {"unsupported_operator", "invalid_value", "too_deep", "too_many_conditions"}

# Field-error codes of a workflow graph that cannot run yet (README: Workflows): the problems enabling or starting
# names, each about the stored steps and transitions, templates and sender domains (server state).
GRAPH_PROBLEMS = {"no_steps", "no_entry", "no_trigger", "invalid_branch", "missing_branch", "unreachable", "cycle", "not_found",
                  "required", "domain_not_verified"}

# (operation label or ANY, status, error.code of the envelope, field-error codes or None for "any") -> why
REFUSED_BY_DESIGN: dict[tuple[str, int, str, frozenset[str] | None], str] = {
    # Rules on every input, stated once in the document's description rather than on each schema: no text (string,
    # key or parameter) with NUL (U+0000) or a lone UTF-16 surrogate (`invalid_characters`; Postgres can store
    # neither), no `__proto__` key (`forbidden_key`), JSON at most 32 levels deep (`too_deep`). As schemas they would be
    # a pattern on every string (one that JavaScript, Python and Rust regex engines read alike cannot name lone
    # surrogates), a `propertyNames` on every object and a depth bound on every free-form value, recursively.
    (ANY, 422, "VALIDATION_ERROR", frozenset({"invalid_characters", "forbidden_key", "too_deep"})):
        "NUL and lone surrogates in text, __proto__ keys and deep nesting are refused in every input",
    # The activity feed's cursor is its last item's time and key (an event id, or a campaign or step key) as JSON in
    # base64url, and its decoder (domain/activity/activity.service.ts) takes any key text up to 100 characters: base64
    # of JSON-escaped text has no pattern of practical size. (The id lists' and the field-values cursors have exact
    # patterns and need no entry; a fixed-width activity cursor would let this one go too.)
    ("GET /activity", 422, "VALIDATION_ERROR", frozenset({"invalid_cursor"})):
        "the activity cursor (JSON text in base64url) has no pattern of practical size",
    # The uploaded file must be a UTF-8 CSV with an email column (operation description); `format: binary` cannot
    # describe file contents.
    ("POST /contacts/import", 422, "VALIDATION_ERROR", frozenset({"invalid_csv", "invalid_mapping", "invalid_json"})):
        "the file's contents and the mapping against its header are checked, as the description says",
    # The uploaded image must be a PNG, JPEG, GIF or WebP by its bytes (operation description): the same limit of
    # `format: binary`.
    ("POST /uploads/image", 422, "VALIDATION_ERROR", frozenset({"unsupported_image_type", "svg_not_allowed", "empty_file", "invalid_image"})):
        "the file's bytes must be an image of an accepted type, as the description says",
    # Members are managed on STATIC segments only (operation description); the id the fuzzer drew may be a DYNAMIC
    # segment, which is server state.
    ("POST /segments/{id}/members", 422, "VALIDATION_ERROR", frozenset({"dynamic_segment"})):
        "the segment is dynamic (server state)",
    ("DELETE /segments/{id}/members", 422, "VALIDATION_ERROR", frozenset({"dynamic_segment"})):
        "the segment is dynamic (server state)",
    # The Filter component states a filter's shape (keys, operators, field names, value types of event conditions);
    # which operators each kind of field takes, each operator's value, the depth of nesting and the count across all
    # levels are the filter validator's (README: Filter language) and would take a schema per field kind per operator.
    ("POST /segments", 422, "VALIDATION_ERROR", frozenset(FILTER_SEMANTICS)):
        "filter semantics beyond its shape (operator per field, value per operator, depth, total count)",
    # The same, plus: `condition` changes dynamic segments only; the segment's type is server state.
    ("PATCH /segments/{id}", 422, "VALIDATION_ERROR", frozenset({*FILTER_SEMANTICS, "static_segment"})):
        "filter semantics beyond its shape, or the segment is static (server state)",
    # A campaign's `audienceFilter` is the same Filter component, checked by the same validator before anything else.
    ("POST /campaigns", 422, "VALIDATION_ERROR", frozenset(FILTER_SEMANTICS)):
        "filter semantics beyond its shape (operator per field, value per operator, depth, total count)",
    ("PUT /campaigns/{id}", 422, "VALIDATION_ERROR", frozenset(FILTER_SEMANTICS)):
        "filter semantics beyond its shape (operator per field, value per operator, depth, total count)",
    ("PATCH /campaigns/{id}", 422, "VALIDATION_ERROR", frozenset(FILTER_SEMANTICS)):
        "filter semantics beyond its shape (operator per field, value per operator, depth, total count)",
    # A/B tests (README: A/B-tested campaigns): a pick needs a campaign with that many variants, and a send needs an
    # audience large enough for the test shares, both server state.
    ("POST /campaigns/{id}/winner", 422, "VALIDATION_ERROR", frozenset({"no_variants", "not_found"})):
        "the campaign has no A/B test, or not the variant picked (server state)",
    ("POST /campaigns/{id}/send", 422, "VALIDATION_ERROR", frozenset({"audience_too_small"})):
        "the audience is too small for the A/B test's shares (server state: the contacts)",
    # Workflows: the trigger filter and CONDITION filters are the filter language (semantics beyond the shape, as above);
    # enabling, an entry step, a manual start and transitions depend on the stored graph; a step's config must fit the
    # step's type, and a splice needs a step with one successor (server state).
    ("POST /workflows", 422, "VALIDATION_ERROR", frozenset(FILTER_SEMANTICS)):
        "filter semantics beyond its shape (operator per field, value per operator, depth, total count)",
    ("PATCH /workflows/{id}", 422, "VALIDATION_ERROR", frozenset({*FILTER_SEMANTICS, *GRAPH_PROBLEMS})):
        "filter semantics beyond its shape, or the stored graph cannot run yet (server state)",
    # A WEBHOOK url is checked by the URL parser too: a host ending in a number must be a valid IPv4 address (WHATWG);
    # header names are case-insensitive, so one given twice in other case is refused (JSON Schema compares exactly).
    ("POST /workflows/{id}/steps", 422, "VALIDATION_ERROR", frozenset({*FILTER_SEMANTICS, "invalid_url", "invalid_header"})):
        "filter semantics beyond its shape, a host that ends in a number and is no IPv4 address, or a header name twice",
    # A webhook endpoint's URL: http only to a network the SSRF guard allows, never an address it refuses, and the URL
    # parser's own rules (a host ending in a number must be an IPv4 address): server configuration, not the URL's shape.
    ("POST /webhook-endpoints", 422, "VALIDATION_ERROR", frozenset({"invalid_url"})):
        "http to a network the SSRF guard does not allow, a refused address, or a host the URL parser rejects",
    ("PATCH /webhook-endpoints/{id}", 422, "VALIDATION_ERROR", frozenset({"invalid_url"})):
        "http to a network the SSRF guard does not allow, a refused address, or a host the URL parser rejects",
    # A replay's range: `to` after `from`, at most 31 days (a relation between two fields, operation description).
    ("POST /webhook-endpoints/{id}/replay", 422, "VALIDATION_ERROR", frozenset({"invalid_range", "range_too_large"})):
        "to not after from, or a range over 31 days",
    ("PATCH /workflows/{id}/steps/{stepId}", 422, "VALIDATION_ERROR", frozenset({*FILTER_SEMANTICS, "wrong_step_type"})):
        "filter semantics beyond its shape, or a config of another step type than the stored step's (server state)",
    ("DELETE /workflows/{id}/steps/{stepId}", 422, "VALIDATION_ERROR", frozenset({"ambiguous_splice"})):
        "the step has two connected branches (server state)",
    ("POST /workflows/{id}/transitions", 422, "VALIDATION_ERROR", frozenset({"not_found", "invalid_branch"})):
        "the steps must be this workflow's, and the branch fits the source step's type (server state)",
    ("POST /workflows/{id}/executions", 422, "VALIDATION_ERROR", frozenset({*GRAPH_PROBLEMS, "not_found"})):
        "the contact must be the project's, and the graph must be able to run (server state)",
    # Analytics: `from` after `to` is a relation between two parameters; the zone must be one Postgres knows (its zone
    # database, server state); hour ranges are capped by length (README: Analytics).
    ("GET /analytics/timeseries", 422, "VALIDATION_ERROR", frozenset({"invalid_range", "range_too_large", "invalid_timezone"})):
        "from after to, a range over the bucket cap, or a zone name Postgres does not know",
    ("GET /analytics/top-events", 422, "VALIDATION_ERROR", frozenset({"invalid_range"})):
        "from after to",
    ("GET /analytics/top-campaigns", 422, "VALIDATION_ERROR", frozenset({"invalid_range"})):
        "from after to",
    ("GET /analytics/campaign-stats", 422, "VALIDATION_ERROR", frozenset({"invalid_range"})):
        "from after to",
    # A reset is confirmed by the project's name (server state).
    ("POST /users/@me/projects/{id}/reset", 422, "VALIDATION_ERROR", frozenset({"confirmation_mismatch"})):
        "confirm is not the project's name (server state)",
    ("GET /activity", 422, "VALIDATION_ERROR", frozenset({"invalid_range"})):
        "from after to",
    ("GET /activity/stats", 422, "VALIDATION_ERROR", frozenset({"invalid_range"})):
        "from after to",
    # A sender address must be on a VERIFIED domain of the project (SPEC; field code `unverified_domain`): server
    # state, not shape.
    ("POST /v1/send", 422, "VALIDATION_ERROR", frozenset({"unverified_domain"})):
        "the sender domain is not verified in this project (server state)",
    ("POST /templates", 422, "VALIDATION_ERROR", frozenset({"unverified_domain"})):
        "the sender domain is not verified in this project (server state)",
    ("PATCH /templates/{id}", 422, "VALIDATION_ERROR", frozenset({"unverified_domain"})):
        "the sender domain is not verified in this project (server state)",
    # Amazon SNS deliveries: the body is an SNS message (JSON sent as text/plain) that must carry a valid AWS
    # signature; nothing a fuzzer generates is one, so a schema-valid string is refused as not being an SNS message.
    ("POST /webhooks/sns", 400, "INVALID_JSON", None):
        "only signed Amazon SNS messages are accepted",
    ("POST /webhooks/sns", 400, "BAD_REQUEST", None):
        "only signed Amazon SNS messages are accepted",
    ("POST /webhooks/sns", 422, "VALIDATION_ERROR", None):
        "only signed Amazon SNS messages are accepted",
}


def _error(response: Any) -> tuple[str | None, list[str]]:
    try:
        body = json.loads(response.content)
    except (ValueError, TypeError):
        return None, []
    error = body.get("error") if isinstance(body, dict) else None
    if not isinstance(error, dict):
        return None, []
    fields = error.get("errors") or []
    return error.get("code"), [str(f.get("code")) for f in fields if isinstance(f, dict)]


def refused_by_design(label: str, response: Any) -> str | None:
    code, field_codes = _error(response)
    for (operation, status, error_code, allowed), why in REFUSED_BY_DESIGN.items():
        if operation not in (ANY, label) or response.status_code != status or code != error_code:
            continue
        if allowed is None or (field_codes and all(c in allowed for c in field_codes)):
            return why
    return None


def _sent_path_parameters(case: Any, response: Any) -> dict[str, str]:
    """The path parameters as the server received them: read back from the request's URL and percent-decoded."""
    names: list[str] = []

    def group(match: re.Match[str]) -> str:
        names.append(match.group(1))
        return "([^/]*)"

    template = re.sub(r"\\\{([^}]+)\\\}", group, re.escape(case.operation.path))
    sent = re.search(f"{template}$", urlsplit(response.request.url).path)
    return {name: unquote(value) for name, value in zip(names, sent.groups())} if sent else {}


def invalid_path_parameter(case: Any, response: Any) -> str | None:
    """A path parameter whose value breaks its own declared schema: the request was not schema-valid after all.

    The stateful phase fills path parameters from earlier responses through inferred links, and a link can carry a
    value the target does not accept: GET /events returns `emailId: null` for events without an email, and the
    inferred link to GET /emails/{id} then requests `/emails/None`. The 422 `Must be a UUID` is right. The value is
    also checked as the server received it (decoded from the URL sent): one run sent control characters in
    `/events/{eventName}` that its generated value did not have, and the server's 422 for them is right too.
    """
    sent = _sent_path_parameters(case, response)
    for parameter in case.operation.definition.raw.get("parameters", []):
        if parameter.get("in") != "path" or "schema" not in parameter:
            continue
        name = parameter["name"]
        validator = jsonschema_rs.validator_for(parameter["schema"], validate_formats=True)
        for value in ((case.path_parameters or {}).get(name), sent.get(name)):
            if value is not None and not validator.is_valid(value):
                return f"path parameter {name}={value!r} does not match its schema"
    return None


load_all_checks()
_builtin_positive_data_acceptance = CHECKS.get_one("positive_data_acceptance")


def positive_data_acceptance(ctx: Any, response: Any, case: Any) -> bool | None:
    """schemathesis' own check, minus the refusals listed in REFUSED_BY_DESIGN."""
    try:
        return _builtin_positive_data_acceptance(ctx, response, case)
    except RejectedPositiveData:
        if refused_by_design(case.operation.label, response) is not None or invalid_path_parameter(case, response) is not None:
            return None
        raise


# Same name: replaces the built-in entry, so `[checks.positive_data_acceptance]` settings and reports still apply.
CHECKS.register(positive_data_acceptance)
