// Message bodies the benchmarks render: realistic Liquid over HTML and MJML (bench:render, bench:campaign).

/** A typical digest: greeting with a default, a loop, conditionals, a few links, a footer with the contact's links. */
export const HTML_BODY = `<!doctype html><html><head><meta charset="utf-8"><title>Your summary</title>
<style>body{font-family:Helvetica,Arial,sans-serif;color:#222}.btn{background:#2563eb;color:#fff;padding:12px 20px;border-radius:6px;text-decoration:none}</style></head>
<body><div style="max-width:600px;margin:0 auto;padding:24px">
<img src="https://cdn.example.com/logo.png" alt="Example" width="120">
<h1>Hi {{ first_name ?? "there" }},</h1>
<p>Here is what happened on your <strong>{{ plan }}</strong> plan in {{ month }}. You have {{ credits | default: 0 }} credits left.</p>
{% if orders.size > 0 %}
<table width="100%" cellpadding="0" cellspacing="0">
{% for order in orders %}
  <tr>
    <td style="padding:8px 0;border-bottom:1px solid #eee"><a href="https://shop.example.com/orders/{{ order.id }}?utm_source=mail&amp;utm_campaign=digest">Order {{ order.id }}</a> &middot; {{ order.items }} item{% if order.items != 1 %}s{% endif %}</td>
    <td style="padding:8px 0;border-bottom:1px solid #eee;text-align:right">{{ order.total | times: 1.2 | round: 2 }} {{ currency ?? EUR }}</td>
  </tr>
{% endfor %}
</table>
{% else %}
<p>No orders this month. <a href="https://shop.example.com/new?ref={{ id }}">See what is new</a>.</p>
{% endif %}
<p style="margin:24px 0"><a class="btn" href="https://app.example.com/dashboard?u={{ id }}&amp;m={{ month | url_encode }}">Open your dashboard</a></p>
<p>Recommended for you:</p>
<ul>{% for r in recommendations limit: 5 %}<li><a href="{{ r.url }}">{{ r.title | truncate: 60 }}</a> — {{ r.blurb | strip_html | truncatewords: 20 }}</li>{% endfor %}</ul>
${'<p style="color:#555;font-size:14px">Lorem ipsum dolor sit amet, consectetur adipiscing elit. Integer nec odio. Praesent libero. Sed cursus ante dapibus diam. Sed nisi. Nulla quis sem at nibh elementum imperdiet.</p>\n'.repeat(8)}
<hr><p style="font-size:12px;color:#888">You receive this because {{ email }} is subscribed.
<a href="{{ manageUrl }}">Manage your subscription</a> or <a href="{{ unsubscribeUrl }}">unsubscribe</a>.</p>
</div></body></html>`;

export const MJML_BODY = `<mjml><mj-head><mj-title>Your summary</mj-title><mj-preview>{{ first_name ?? "Hello" }}, your {{ month }} summary</mj-preview>
<mj-attributes><mj-all font-family="Helvetica, Arial, sans-serif" /></mj-attributes></mj-head>
<mj-body background-color="#f4f4f5"><mj-section background-color="#ffffff"><mj-column>
<mj-image src="https://cdn.example.com/logo.png" alt="Example" width="120px" />
<mj-text font-size="20px">Hi {{ first_name ?? "there" }},</mj-text>
<mj-text>Here is what happened on your <strong>{{ plan }}</strong> plan in {{ month }}. You have {{ credits | default: 0 }} credits left.</mj-text>
<mj-table>{% for order in orders %}<tr><td><a href="https://shop.example.com/orders/{{ order.id }}?utm_source=mail&amp;utm_campaign=digest">Order {{ order.id }}</a></td><td style="text-align:right">{{ order.total | times: 1.2 | round: 2 }} {{ currency ?? EUR }}</td></tr>{% endfor %}</mj-table>
<mj-button href="https://app.example.com/dashboard?u={{ id }}">Open your dashboard</mj-button>
<mj-text><ul>{% for r in recommendations limit: 5 %}<li><a href="{{ r.url }}">{{ r.title | truncate: 60 }}</a></li>{% endfor %}</ul></mj-text>
${'<mj-text color="#555555" font-size="14px">Lorem ipsum dolor sit amet, consectetur adipiscing elit. Integer nec odio. Praesent libero. Sed cursus ante dapibus diam.</mj-text>\n'.repeat(6)}
<mj-divider /><mj-text font-size="12px" color="#888888">You receive this because {{ email }} is subscribed.
<a href="{{ manageUrl }}">Manage your subscription</a> or <a href="{{ unsubscribeUrl }}">unsubscribe</a>.</mj-text>
</mj-column></mj-section></mj-body></mjml>`;

/** A campaign newsletter: hero, a loop over articles with buttons, a conditional offer, social links, the footer links. */
export const CAMPAIGN_BODY = `<mjml><mj-head><mj-title>{{ first_name ?? "Hello" }}, the November issue</mj-title>
<mj-preview>Three stories picked for the {{ plan }} plan</mj-preview>
<mj-attributes><mj-all font-family="Helvetica, Arial, sans-serif" /><mj-button background-color="#2563eb" /></mj-attributes></mj-head>
<mj-body background-color="#f4f4f5">
<mj-section background-color="#ffffff"><mj-column>
<mj-image src="https://cdn.example.com/hero.png" alt="November" href="https://www.example.com/?utm_source=newsletter&amp;utm_campaign=nov" />
<mj-text font-size="20px">Hi {{ first_name ?? "there" }},</mj-text>
<mj-text>Here is what we wrote this month{% if plan == "team" %} for your team{% endif %}.</mj-text>
</mj-column></mj-section>
<mj-raw>{% for r in recommendations limit: 3 %}</mj-raw>
<mj-section background-color="#ffffff"><mj-column>
<mj-text font-size="16px"><strong>{{ r.title | truncate: 60 }}</strong></mj-text>
<mj-text>{{ r.blurb | strip_html | truncatewords: 20 }}</mj-text>
<mj-button href="{{ r.url }}&amp;utm_source=newsletter">Read more</mj-button>
</mj-column></mj-section>
<mj-raw>{% endfor %}</mj-raw>
<mj-raw>{% if credits < 10 %}</mj-raw>
<mj-section background-color="#fffbeb"><mj-column><mj-text>Only {{ credits }} credits left: <a href="https://app.example.com/billing?u={{ id }}">top up</a>.</mj-text></mj-column></mj-section>
<mj-raw>{% endif %}</mj-raw>
<mj-section><mj-column>
<mj-social icon-size="24px" mode="horizontal"><mj-social-element name="x" href="https://x.com/example">X</mj-social-element><mj-social-element name="github" href="https://github.com/example">GitHub</mj-social-element></mj-social>
<mj-text font-size="12px" color="#888888">You receive this because {{ email }} subscribed to Example News.
<a href="{{ manageUrl }}">Manage your subscription</a> or <a href="{{ unsubscribeUrl }}">unsubscribe</a>.
<a href="https://www.example.com/privacy">Privacy</a></mj-text>
</mj-column></mj-section>
</mj-body></mjml>`;

