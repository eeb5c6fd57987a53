/**
 * Settings of the services under test that docker-compose.yml leaves at the code's defaults: short intervals so tests
 * take seconds, budgets no test reaches by accident. The stack tier (test/global-setup.ts) and the rehearsal tier
 * (test/rehearsal-global-setup.ts) both set them; the rehearsal refuses any that compose sets itself.
 */
export const TEST_SERVICE_SETTINGS: Record<string, string> = {
  // Sender domains: short checks so verification tests take seconds (DNS_SERVERS names the loopback DNS server).
  DNS_TIMEOUT: '1s',
  DOMAIN_CHECK_INTERVAL: '2s',
  DOMAIN_RECHECK_INTERVAL: '2s',
  DOMAIN_DEMOTE_AFTER: '5s',
  // A budget no test reaches by accident (schemathesis sends thousands of requests as one project); the limiter
  // itself is tested with its own API process and a small budget (rate-limit.test.ts).
  RATE_LIMIT_PER_MINUTE: '60000',
  // Login and account-email throttles no test reaches by accident (every request comes from 127.0.0.1, and the fuzzer
  // sends wrong passwords); account-lifecycle.test.ts tests them with an API process and small limits of its own.
  LOGIN_MAX_FAILURES_PER_ACCOUNT: '1000000',
  LOGIN_MAX_FAILURES_PER_IP: '1000000',
  ACCOUNT_EMAILS_PER_ADDRESS: '1000000',
  ACCOUNT_EMAILS_PER_IP: '1000000',
  SNS_CERT_URL_PATTERN: '^http://127\\.0\\.0\\.1:\\d+/', // webhooks-sns.test.ts plays SNS: certificates and SubscribeURL on loopback
  // The worker registers the probe consumer, which records every event it receives (event-outbox.test.ts).
  EVENTS_PROBE: 'true',
  // Campaign retry passes after a second, not minutes (campaign-send.test.ts).
  CAMPAIGN_RETRY_DELAYS: '1s,1s',
  // The segment recompute sweep looks for due segments every 3 s, not 5 minutes (segments.test.ts backdates a
  // segment to make it due); segments are due only after their project's interval (at least 5 minutes), so the sweep
  // leaves the segments other tests create alone.
  SEGMENT_RECOMPUTE_SWEEP_INTERVAL: '3s',
  // The reputation check never fires by itself during a run (it would judge every test project that sent 100 emails);
  // reputation.test.ts triggers it.
  REPUTATION_CHECK_INTERVAL: '8760h',
  // automation-runs.test.ts: WEBHOOK steps call a receiver on loopback (refused by default, against SSRF); every
  // other non-public address stays refused, which the SSRF test relies on.
  WEBHOOK_ALLOWED_NETWORKS: '127.0.0.0/8',
  WEBHOOK_TIMEOUT: '2s',
  // webhook-endpoints.test.ts: an endpoint whose every attempt failed for 3 s is disabled (two failed attempts, 5 s apart).
  WEBHOOK_ENDPOINT_DISABLE_AFTER: '3s',
};

/** The sender of account emails (account-lifecycle.test.ts checks it); compose's SYSTEM_EMAIL_FROM variable. */
export const TEST_SYSTEM_EMAIL_FROM = 'Mailwright Accounts <accounts@mailwright.test>';
