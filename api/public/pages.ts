import type { AppContext } from '../context';

/**
 * The small HTML pages of the public subscription links: self-contained (inline CSS, no scripts, no external
 * resources), every dynamic value escaped. Forms post to the page's own URL (no `action`), and links to the other
 * pages are relative, so the pages work behind any path prefix.
 */

function escapeHtml(text: string): string {
  return text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;').replace(/'/g, '&#39;');
}

/** Safe markup: built only from escaped values and literals. */
class Html {
  constructor(readonly value: string) {}
}

/** Tagged template that escapes every interpolated value unless it is already Html. */
function html(strings: TemplateStringsArray, ...values: (string | Html)[]): Html {
  let out = strings[0]!;
  values.forEach((v, i) => {
    out += (v instanceof Html ? v.value : escapeHtml(v)) + strings[i + 1]!;
  });
  return new Html(out);
}

const STYLE = `body{font-family:-apple-system,BlinkMacSystemFont,"Segoe UI",Roboto,Helvetica,Arial,sans-serif;background:#f4f4f5;color:#18181b;margin:0;padding:48px 16px}
main{max-width:440px;margin:0 auto;background:#fff;border-radius:8px;padding:32px;box-shadow:0 1px 3px rgba(0,0,0,.1)}
h1{font-size:20px;margin:0 0 12px}p{line-height:1.5;margin:0 0 16px}.muted{color:#71717a;font-size:14px}
button{font:inherit;font-weight:600;border:0;border-radius:6px;padding:10px 18px;cursor:pointer;background:#18181b;color:#fff}
a{color:#2563eb}`;

function layout(title: string, content: Html): string {
  return html`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">
<meta name="robots" content="noindex,nofollow"><title>${title}</title><style>${new Html(STYLE)}</style></head>
<body><main>${content}</main></body></html>`.value;
}

/** Sends `page` as an HTML response: never cached, never framed, the token in the URL never sent on as a referrer. */
export function sendPage(ctx: AppContext, status: number, page: string): { status: number; body: string } {
  ctx.type = 'text/html; charset=utf-8';
  ctx.set('Cache-Control', 'no-store');
  ctx.set('Referrer-Policy', 'no-referrer');
  ctx.set('X-Frame-Options', 'DENY');
  ctx.set('X-Robots-Tag', 'noindex');
  ctx.set('Content-Security-Policy', "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'");
  return { status, body: page };
}

/** Relative link from `/<page>/<token>` to another page of the same token. */
const sibling = (page: 'manage' | 'subscribe' | 'unsubscribe', token: string) => `../${page}/${token}`;

function form(fields: Record<string, string>, label: string): Html {
  const hidden = Object.entries(fields).map(([k, v]) => html`<input type="hidden" name="${k}" value="${v}">`);
  return html`<form method="post">${new Html(hidden.map((h) => h.value).join(''))}<button type="submit">${label}</button></form>`;
}

export const pages = {
  notFound(): string {
    return layout(
      'Link not valid',
      html`<h1>This link is not valid</h1><p>It may be incomplete, or the subscription it was made for no longer exists.</p>
<p class="muted">If you copied it from an email, check that the whole link was copied.</p>`,
    );
  },

  badRequest(message: string): string {
    return layout('Something is missing', html`<h1>Something is missing</h1><p>${message}</p>`);
  },

  confirmUnsubscribe(v: { email: string; projectName: string; subscribed: boolean }, token: string): string {
    if (!v.subscribed) {
      return layout(
        'Unsubscribed',
        html`<h1>You are unsubscribed</h1><p><strong>${v.email}</strong> does not receive marketing email from ${v.projectName}.</p>
<p class="muted"><a href="${sibling('manage', token)}">Manage your subscription</a></p>`,
      );
    }
    return layout(
      'Unsubscribe',
      html`<h1>Unsubscribe?</h1><p><strong>${v.email}</strong> will no longer receive marketing email from ${v.projectName}.</p>
${form({ confirm: 'unsubscribe' }, 'Unsubscribe')}
<p class="muted" style="margin-top:16px">Messages you ask for, such as receipts, may still be sent.</p>`,
    );
  },

  confirmSubscribe(v: { email: string; projectName: string; subscribed: boolean }, token: string): string {
    if (v.subscribed) {
      return layout(
        'Subscribed',
        html`<h1>You are subscribed</h1><p><strong>${v.email}</strong> receives email from ${v.projectName}.</p>
<p class="muted"><a href="${sibling('manage', token)}">Manage your subscription</a></p>`,
      );
    }
    return layout('Subscribe', html`<h1>Subscribe?</h1><p>Receive email from ${v.projectName} at <strong>${v.email}</strong>.</p>${form({ confirm: 'subscribe' }, 'Subscribe')}`);
  },

  done(v: { email: string; projectName: string; subscribed: boolean }, token: string): string {
    const title = v.subscribed ? 'Subscribed' : 'Unsubscribed';
    const text = v.subscribed
      ? html`<strong>${v.email}</strong> will receive email from ${v.projectName}.`
      : html`<strong>${v.email}</strong> will no longer receive marketing email from ${v.projectName}.`;
    return layout(
      title,
      html`<h1>${v.subscribed ? 'You are subscribed' : 'You are unsubscribed'}</h1><p>${text}</p>
<p class="muted">Changed your mind? <a href="${sibling('manage', token)}">Manage your subscription</a></p>`,
    );
  },

  manage(v: { email: string; projectName: string; subscribed: boolean }): string {
    const state = v.subscribed ? 'subscribed to' : 'not subscribed to';
    return layout(
      'Your subscription',
      html`<h1>Your subscription</h1><p><strong>${v.email}</strong> is ${state} email from ${v.projectName}.</p>
${v.subscribed ? form({ subscribed: 'false' }, 'Unsubscribe') : form({ subscribed: 'true' }, 'Subscribe')}`,
    );
  },
};
