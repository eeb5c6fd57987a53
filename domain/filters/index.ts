export * from './filter.types';
export { validateFilter, parseFilter, resolveField, type FilterIssue } from './filter.validate';
export { compileFilter, compileFilterOrThrow, toPositional, pgTextArray, type CompiledFilter, type CompileOptions } from './filter.compile';
export { FilterSchema, asFilter } from './filter.schema';
