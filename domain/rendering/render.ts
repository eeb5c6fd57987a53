import { Liquid } from 'liquidjs';

/**
 * Template rendering shared by /v1/send, campaigns and workflows. Liquid over the contact's variables; unknown
 * variables render empty; file access (include/render/layout) is disabled because templates are user input.
 */
const engine = new Liquid({
  strictVariables: false,
  strictFilters: true,
  ownPropertyOnly: true,
  cache: 500,
  parseLimit: 1_000_000,
  renderLimit: 1_000,
  memoryLimit: 64 * 1024 * 1024,
  relativeReference: false,
  fs: {
    readFileSync: () => {
      throw new Error('include, render and layout are not available in templates');
    },
    readFile: async () => {
      throw new Error('include, render and layout are not available in templates');
    },
    existsSync: () => false,
    exists: async () => false,
    contains: async () => false,
    resolve: (_root, file) => file,
    sep: '/',
  },
});

export function renderTemplate(source: string, variables: Record<string, unknown>): string {
  if (!source.includes('{{') && !source.includes('{%')) return source;
  return engine.parseAndRenderSync(source, variables);
}

/** Null when `source` parses as a Liquid template, else the parser's message (for a 422 on create). */
export function checkTemplateSyntax(source: string): string | null {
  try {
    engine.parse(source);
    return null;
  } catch (err) {
    return (err as Error).message;
  }
}
