import { z } from 'zod';
import type { Routes } from '../route';
import type { ApiDeps, AppContext } from '../context';
import { pages, sendPage } from './pages';
import { linkTokens } from '../../domain/tracking/tokens';
import { changeSubscription, findSubscription, recordClick, recordOpen } from '../../domain/tracking/tracking.service';

/** A transparent 1x1 GIF. */
const PIXEL = Buffer.from('R0lGODlhAQABAIAAAAAAAP///yH5BAEAAAAALAAAAAABAAEAAAIBRAA7', 'base64');

// Any string: a bad token is answered by the page (or the pixel), never by a JSON validation error.
const TokenParams = z.object({ token: z.string().meta({ description: 'Signed token from the link' }) });
// Lenient on purpose: mail clients' one-click posts vary, and an odd field (e.g. repeated) must not block the unsubscribe.
const lenientText = (description: string) =>
  z.preprocess((v) => (typeof v === 'string' ? v : undefined), z.string().optional()).meta({ description });
const OneClickBody = z.object({ 'List-Unsubscribe': lenientText('`One-Click` for an RFC 8058 one-click post') });
const ManageBody = z.object({ subscribed: lenientText('`true` or `false`') });

const HTML = 'text/html';
const HtmlPage = z.string().meta({ description: 'A small self-contained HTML page' });
const page = (description: string) => ({ description, contentType: HTML, schema: HtmlPage });
const pageResponses = (ok: string) => ({
  200: page(ok),
  404: page('Unknown or altered link, or the contact no longer exists'),
});

/**
 * The unauthenticated endpoints behind the links in sent mail: the open pixel, click redirects and the
 * unsubscribe/subscribe/manage pages. The signed token is the only credential: it names the email or contact, so
 * nothing else is looked up to authorize. GET never changes anything (link scanners prefetch GETs).
 */
export function publicRoutes(routes: Routes, deps: ApiDeps): void {
  const tokens = linkTokens(deps.config.appSecret);
  const tags = ['Tracking and subscription links'];

  routes.add({
    method: 'get',
    path: '/t/o/:token',
    summary: 'Open pixel',
    description:
      'Answers a transparent 1x1 GIF. A genuine token records `email.open` on the contact and counts the open on the email ' +
      '(`first_opened_at` on the first); any other token gets the same pixel and records nothing.',
    tags,
    auth: 'none',
    params: TokenParams,
    responses: { 200: { description: 'The pixel', contentType: 'image/gif', schema: z.string().meta({ format: 'binary' }) } },
    handler: async ({ ctx, params }) => {
      const open = tokens.verify(params.token, 'open');
      // HEAD (the router answers it with this handler) comes from link checkers, not readers: not an open.
      if (open && ctx.method === 'GET') await recordOpen(ctx.state.em, open.emailId);
      ctx.type = 'image/gif';
      ctx.set('Cache-Control', 'no-store');
      return { status: 200, body: PIXEL };
    },
  });

  routes.add({
    method: 'get',
    path: '/t/c/:token',
    summary: 'Click redirect',
    description:
      'Redirects (302) to the URL signed into the token and records `email.click` with `{ url }` (and the email\'s click ' +
      'count). A forged or altered token gets a 404 page and no redirect, so this is never an open redirect.',
    tags,
    auth: 'none',
    params: TokenParams,
    responses: { 302: { description: 'To the link target' }, 404: page('Not a genuine link') },
    handler: async ({ ctx, params }) => {
      const click = tokens.verify(params.token, 'click');
      if (!click || !/^https?:\/\//i.test(click.url)) return sendPage(ctx, 404, pages.notFound());
      // The target is ours to vouch for (we signed it), so the redirect works even when the email row is gone.
      if (ctx.method === 'GET') await recordClick(ctx.state.em, click.emailId, click.url);
      ctx.set('Cache-Control', 'no-store');
      ctx.set('Referrer-Policy', 'no-referrer');
      ctx.redirect(click.url);
      return { status: 302 };
    },
  });

  /** The contact and, for a link composed into an email, that email (recorded with the subscription change). */
  const targetOf = (token: string) => tokens.verify(token, 'contact');
  const contactOf = (token: string) => targetOf(token)?.contactId ?? null;

  /** GET: a confirmation page of the state `subscribed` would set; nothing changes. */
  const confirmPage = (subscribed: boolean) => async ({ ctx, params }: { ctx: AppContext; params: { token: string } }) => {
    const contactId = contactOf(params.token);
    const view = contactId ? await findSubscription(ctx.state.em, contactId) : null;
    if (!view) return sendPage(ctx, 404, pages.notFound());
    return sendPage(ctx, 200, subscribed ? pages.confirmSubscribe(view, params.token) : pages.confirmUnsubscribe(view, params.token));
  };

  /** POST: sets the state; repeated posts change nothing more and record nothing more. */
  const applyChange = (subscribed: boolean, via: string) => async ({ ctx, params, body }: { ctx: AppContext; params: { token: string }; body: z.infer<typeof OneClickBody> }) => {
    const oneClick = !subscribed && body['List-Unsubscribe'] === 'One-Click';
    const target = targetOf(params.token);
    const result = target ? await changeSubscription(ctx.state.em, target, subscribed, oneClick ? { via, oneClick: true } : { via }) : null;
    if (!result) return sendPage(ctx, 404, pages.notFound());
    if (oneClick) {
      // RFC 8058: the mail client only looks at the status; no page to render.
      ctx.type = 'text/plain; charset=utf-8';
      ctx.set('Cache-Control', 'no-store');
      return { status: 200, body: 'Unsubscribed\n' };
    }
    return sendPage(ctx, 200, pages.done(result.view, params.token));
  };

  routes.add({
    method: 'get',
    path: '/unsubscribe/:token',
    summary: 'Unsubscribe confirmation page',
    description: 'An HTML page with a button that posts the unsubscribe. Changes nothing: link scanners fetch GETs.',
    tags,
    auth: 'none',
    params: TokenParams,
    responses: pageResponses('Confirmation page (or: already unsubscribed)'),
    handler: confirmPage(false),
  });

  routes.add({
    method: 'post',
    path: '/unsubscribe/:token',
    summary: 'Unsubscribe (also the RFC 8058 one-click target)',
    description:
      'Unsubscribes the contact and records `contact.unsubscribed` with `{ via: "unsubscribe_link" }` (plus `oneClick: true` for ' +
      'one-click posts) when the state really changes, with `emailId` set when the link came from an email (a campaign ' +
      'counts it as its unsubscribe); idempotent. Takes the page\'s form post, an empty body, or the ' +
      'one-click body `List-Unsubscribe=One-Click` (urlencoded or multipart), which is answered with a plain-text 200.',
    tags,
    auth: 'none',
    params: TokenParams,
    body: OneClickBody,
    form: true,
    responses: pageResponses('Unsubscribed: an HTML page (plain text `Unsubscribed` for one-click posts)'),
    handler: applyChange(false, 'unsubscribe_link'),
  });

  routes.add({
    method: 'get',
    path: '/subscribe/:token',
    summary: 'Subscribe confirmation page',
    description: 'An HTML page with a button that posts the subscription. Changes nothing.',
    tags,
    auth: 'none',
    params: TokenParams,
    responses: pageResponses('Confirmation page (or: already subscribed)'),
    handler: confirmPage(true),
  });

  routes.add({
    method: 'post',
    path: '/subscribe/:token',
    summary: 'Subscribe',
    description: 'Subscribes the contact and records `contact.subscribed` with `{ via: "subscribe_link" }` when the state really changes; idempotent.',
    tags,
    auth: 'none',
    params: TokenParams,
    body: OneClickBody,
    form: true,
    responses: pageResponses('Subscribed'),
    handler: applyChange(true, 'subscribe_link'),
  });

  routes.add({
    method: 'get',
    path: '/manage/:token',
    summary: 'Subscription page',
    description: 'Shows whether the contact is subscribed, with a button to change it. Changes nothing.',
    tags,
    auth: 'none',
    params: TokenParams,
    responses: pageResponses('The current state'),
    handler: async ({ ctx, params }) => {
      const contactId = contactOf(params.token);
      const view = contactId ? await findSubscription(ctx.state.em, contactId) : null;
      if (!view) return sendPage(ctx, 404, pages.notFound());
      return sendPage(ctx, 200, pages.manage(view));
    },
  });

  routes.add({
    method: 'post',
    path: '/manage/:token',
    summary: 'Change the subscription',
    description: 'Form field `subscribed=true|false`. A change records `contact.subscribed` / `contact.unsubscribed` with `{ via: "manage_page" }`.',
    tags,
    auth: 'none',
    params: TokenParams,
    body: ManageBody,
    form: true,
    responses: { ...pageResponses('The new state'), 400: page('`subscribed` missing or not true/false') },
    handler: async ({ ctx, params, body }) => {
      const target = targetOf(params.token);
      if (!target) return sendPage(ctx, 404, pages.notFound());
      if (body.subscribed !== 'true' && body.subscribed !== 'false') {
        return sendPage(ctx, 400, pages.badRequest('Choose whether to subscribe or unsubscribe.'));
      }
      const result = await changeSubscription(ctx.state.em, target, body.subscribed === 'true', { via: 'manage_page' });
      if (!result) return sendPage(ctx, 404, pages.notFound());
      return sendPage(ctx, 200, pages.done(result.view, params.token));
    },
  });
}
