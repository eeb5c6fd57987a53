export default async function globalTeardown(): Promise<void> {
  await globalThis.__MAILWRIGHT_STACK__?.stop();
}
