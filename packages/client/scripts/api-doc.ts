/**
 * Writes `API.md`, the API reference of `@requester/client`, from its types and their doc
 * comments (what an editor shows), or with `--check` fails when the checked-in file differs
 * (`pnpm run client:check`): a change to the public API cannot ship without its reference.
 *
 *   node packages/client/scripts/api-doc.ts [--check]
 */
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { writeOrCheck } from '../../shared/scripts/generated-files.ts';

const packageDir = fileURLToPath(new URL('../', import.meta.url));
const target = `${packageDir}API.md`;

/** The package's exports and their source files, in the order the reference shows them. */
const ENTRIES = [
  { name: '@requester/client', file: 'src/index.ts' },
  { name: '@requester/client/kafka', file: 'src/kafka/index.ts' },
  { name: '@requester/client/receivers', file: 'src/receivers/index.ts' },
] as const;

const FORMAT = ts.TypeFormatFlags.NoTruncation | ts.TypeFormatFlags.UseAliasDefinedOutsideCurrentScope;

function generate(): string {
  const files = ENTRIES.map((e) => `${packageDir}${e.file}`);
  const program = ts.createProgram(files, {
    module: ts.ModuleKind.NodeNext,
    moduleResolution: ts.ModuleResolutionKind.NodeNext,
    target: ts.ScriptTarget.ES2022,
    lib: ['lib.es2022.d.ts', 'lib.dom.d.ts'],
    types: [],
    strict: true,
    allowImportingTsExtensions: true,
    noEmit: true,
  });
  const checker = program.getTypeChecker();
  const out: string[] = [
    '# @requester/client API reference',
    '',
    'Generated from the types and their doc comments by `packages/client/scripts/api-doc.ts`',
    '(`pnpm run client:emit`); do not edit. The contract types (`RequestEnvelope`, `ResultEnvelope`,',
    '`JournalEvent`…) are generated from `contracts/*.schema.json`.',
  ];
  for (const entry of ENTRIES) {
    const source = program.getSourceFile(`${packageDir}${entry.file}`);
    const moduleSymbol = source && checker.getSymbolAtLocation(source);
    if (!moduleSymbol) throw new Error(`cannot read ${entry.file}`);
    out.push('', `## ${entry.name}`);
    const exports = checker
      .getExportsOfModule(moduleSymbol)
      .map((s) => (s.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(s) : s))
      .sort((a, b) => rank(a) - rank(b) || a.name.localeCompare(b.name));
    for (const symbol of exports) out.push('', ...describe(checker, symbol));
  }
  return `${out.join('\n')}\n`;
}

/** Classes and functions first, then interfaces and types. */
function rank(symbol: ts.Symbol): number {
  if (symbol.flags & ts.SymbolFlags.Class) return 0;
  if (symbol.flags & ts.SymbolFlags.Function) return 1;
  if (symbol.flags & ts.SymbolFlags.Variable) return 2;
  return 3;
}

function doc(checker: ts.TypeChecker, symbol: ts.Symbol): string {
  return ts.displayPartsToString(symbol.getDocumentationComment(checker)).trim();
}

function describe(checker: ts.TypeChecker, symbol: ts.Symbol): string[] {
  const lines: string[] = [];
  const declaration = symbol.declarations?.[0];
  if (!declaration) return lines;
  const text = doc(checker, symbol);
  if (symbol.flags & ts.SymbolFlags.Class) {
    const type = checker.getTypeOfSymbolAtLocation(symbol, declaration);
    const base = (declaration as ts.ClassDeclaration).heritageClauses?.[0]?.types[0]?.getText();
    lines.push(`### class \`${symbol.name}\`${base ? ` extends \`${base}\`` : ''}`, '');
    if (text) lines.push(text, '');
    for (const signature of type.getConstructSignatures()) {
      const params = signature.parameters.map((p) => param(checker, p, declaration)).join(', ');
      if (params) lines.push(`- \`new ${symbol.name}(${params})\``);
    }
    const instance = checker.getDeclaredTypeOfSymbol(symbol);
    for (const member of instance.getProperties()) {
      const memberDeclaration = member.declarations?.[0];
      if (!memberDeclaration || member.name.startsWith('#') || member.name === 'name') continue;
      // Only what the class itself declares: inherited members are documented on the base class.
      if (memberDeclaration.parent !== declaration) continue;
      const flags = ts.getCombinedModifierFlags(memberDeclaration);
      if (flags & (ts.ModifierFlags.Private | ts.ModifierFlags.Protected)) continue;
      const memberType = checker.getTypeOfSymbolAtLocation(member, declaration);
      const signatures = memberType.getCallSignatures();
      const shown =
        member.flags & ts.SymbolFlags.Method
          ? signatures
              .map((s) => `${member.name}${checker.signatureToString(s, undefined, FORMAT)}`)
              .join(' / ')
          : `${member.name}: ${checker.typeToString(memberType, undefined, FORMAT)}`;
      const memberDoc = doc(checker, member);
      lines.push(`- \`${shown}\`${memberDoc ? `: ${oneLine(memberDoc)}` : ''}`);
    }
    return lines;
  }
  if (symbol.flags & ts.SymbolFlags.Function) {
    const type = checker.getTypeOfSymbolAtLocation(symbol, declaration);
    lines.push(`### function \`${symbol.name}\``, '');
    for (const signature of type.getCallSignatures())
      lines.push('```ts', `${symbol.name}${checker.signatureToString(signature, undefined, FORMAT)}`, '```');
    if (text) lines.push('', text);
    return lines;
  }
  if (symbol.flags & ts.SymbolFlags.Variable) {
    const type = checker.getTypeOfSymbolAtLocation(symbol, declaration);
    lines.push(`### const \`${symbol.name}\`: \`${checker.typeToString(type, undefined, FORMAT)}\``);
    if (text) lines.push('', text);
    return lines;
  }
  if (symbol.flags & ts.SymbolFlags.Interface) {
    lines.push(`### interface \`${symbol.name}\``, '');
    if (text) lines.push(text, '');
    const type = checker.getDeclaredTypeOfSymbol(symbol);
    for (const property of type.getProperties()) {
      const optional = property.flags & ts.SymbolFlags.Optional ? '?' : '';
      const propertyType = checker.getTypeOfSymbolAtLocation(property, declaration);
      const shown = checker.typeToString(propertyType, undefined, FORMAT).replace(/ \| undefined$/, '');
      const propertyDoc = doc(checker, property);
      lines.push(
        `- \`${property.name}${optional}: ${shown}\`${propertyDoc ? `: ${oneLine(propertyDoc)}` : ''}`,
      );
    }
    return lines;
  }
  if (symbol.flags & ts.SymbolFlags.TypeAlias) {
    const node = declaration as ts.TypeAliasDeclaration;
    lines.push(
      `### type \`${symbol.name}\``,
      '',
      '```ts',
      `type ${symbol.name} = ${node.type.getText()};`,
      '```',
    );
    if (text) lines.push('', text);
  }
  return lines;
}

function param(checker: ts.TypeChecker, p: ts.Symbol, at: ts.Node): string {
  const declaration = p.valueDeclaration as ts.ParameterDeclaration | undefined;
  const optional = declaration?.questionToken || declaration?.initializer ? '?' : '';
  return `${p.name}${optional}: ${checker.typeToString(checker.getTypeOfSymbolAtLocation(p, at), undefined, FORMAT)}`;
}

function oneLine(text: string): string {
  return text.replace(/\s*\n\s*/g, ' ');
}

process.exitCode = writeOrCheck(
  [{ path: target, label: 'packages/client/API.md (from the types)', text: generate() }],
  {
    check: process.argv.includes('--check'),
    emitCommand: 'pnpm run client:emit',
  },
);
