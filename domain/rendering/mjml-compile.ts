/**
 * MJML's compile with this service's options: what render.ts runs in process, and the entry of the worker's MJML
 * thread (mjml-thread.ts), which calls the default export with the source.
 */

interface MjmlIssue {
  line?: number;
  message: string;
  tagName?: string;
}

export interface MjmlOutput {
  html: string;
  errors: MjmlIssue[];
}

export async function mjmlToHtml(source: string): Promise<MjmlOutput> {
  // Loaded on first use: MJML and what it brings (juice, cheerio, undici) are about half of what a campaign render
  // thread loads when it starts, and an HTML campaign never needs them. mjml 5 answers a promise (older majors
  // answered synchronously; `await` covers both).
  const { default: mjml2html } = await import('mjml');
  const result = await mjml2html(source, {
    validationLevel: 'soft',
    ignoreIncludes: true, // mj-include would read files
    keepComments: false,
    minify: false,
    beautify: false,
  });
  // Only what render.ts reads, as plain data (it crosses from the MJML thread).
  return { html: result.html, errors: result.errors.map((e) => ({ line: e.line, message: e.message, tagName: e.tagName })) };
}

/** The MJML thread's entry (piscina calls it with each source). */
export default function compileInThread(source: string): Promise<MjmlOutput> {
  return mjmlToHtml(source);
}
