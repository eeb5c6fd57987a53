// libqp ships no types: the one function the tests use (quoted-printable decoding, as mailparser decodes).
declare module 'libqp' {
  const libqp: { decode(input: string): Buffer };
  export default libqp;
}
