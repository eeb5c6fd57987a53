import { reasonOfSuppressedError, smtpRefusalSuppresses, suppressedError } from '../../domain/suppressions/suppression.service';
import { SUPPRESSION_REASONS } from '../../domain/suppressions/suppression.entity';

describe('which 5xx refusals while sending suppress the address', () => {
  test.each([
    // The address: unknown mailbox or domain, a disabled mailbox, no route, a bare failure.
    ['550 5.1.1 <jane@example.com>: Recipient address rejected: User unknown', 'RCPT TO', true],
    ['550-5.1.1 The email account that you tried to reach does not exist.', 'RCPT TO', true],
    ['550 5.1.10 RESOLVER.ADR.RecipientNotFound; Recipient not found by SMTP address lookup', 'RCPT TO', true],
    ['554 5.2.1 Mailbox disabled, not accepting messages', 'RCPT TO', true],
    ['550 5.4.1 Recipient address rejected: Access denied', 'RCPT TO', true],
    ['553 5.1.3 Bad recipient address syntax', 'RCPT TO', true],
    // Reported after DATA but naming the address (servers that check recipients late).
    ['550 5.1.1 User unknown', 'DATA', true],
    // This message, not the address: full mailbox, too large, content, policy.
    ['552 5.2.2 Mailbox full', 'RCPT TO', false],
    ['552 5.3.4 Message size exceeds fixed limit', 'DATA', false],
    ['554 5.6.0 Message contains invalid header', 'DATA', false],
    ['550 5.7.1 Message rejected as spam', 'DATA', false],
    ['550-5.7.26 Unauthenticated email from example.com is not accepted', 'DATA', false],
    // No enhanced status: the command decides.
    ['550 Requested action not taken: mailbox unavailable', 'RCPT TO', true],
    ['554 Transaction failed', 'DATA', false],
    ['550 No such user', undefined, false],
  ])('%s (%s): %s', (response, command, expected) => {
    expect(smtpRefusalSuppresses({ response, command })).toBe(expected);
  });

  test('a 4.x.x status in a 5xx reply is not taken for a permanent address failure', () => {
    expect(smtpRefusalSuppresses({ response: '550 4.2.2 Mailbox temporarily full', command: 'RCPT TO' })).toBe(false);
  });
});

test("an email's suppressed error names its reason, and the reason is read back from it (the /v1/send replay does)", () => {
  for (const reason of SUPPRESSION_REASONS) expect(reasonOfSuppressedError(suppressedError(reason))).toBe(reason);
  expect(reasonOfSuppressedError('Rejected by the SMTP server')).toBeUndefined();
  expect(reasonOfSuppressedError("Not sent: the address is on the project's suppression list (made_up)")).toBeUndefined();
  expect(reasonOfSuppressedError(null)).toBeUndefined();
});
