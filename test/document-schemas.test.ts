// Every example in openapi.yaml is valid against the schema it illustrates: a request or answer
// body (paths, webhooks, shared responses), a parameter, a header, and a schema's own example. A
// reader copies examples; a generator of mocks and a fuzzer trust them.
import { Ajv2020 } from 'ajv/dist/2020.js';
import formats from 'ajv-formats';
import { loadDocument } from '../src/http/document.ts';

type Node = Record<string, unknown>;
const document = loadDocument() as Node;
const isNode = (value: unknown): value is Node => typeof value === 'object' && value !== null && !Array.isArray(value);

const ajv = new Ajv2020({ strict: false, allErrors: true, discriminator: true });
// A CommonJS module: its function is the namespace's `default`.
formats.default(ajv);
// The document is the schemas' root: a `$ref` such as `#/components/schemas/Notification` resolves in it.
ajv.addSchema({ ...document, $id: 'openapi' });

const escape = (key: string) => key.replaceAll('~', '~0').replaceAll('/', '~1');
const resolve = (node: Node): Node => {
  if (typeof node.$ref !== 'string') return node;
  return node.$ref.slice(2).split('/').reduce<Node>((at, key) => at[key.replaceAll('~1', '/').replaceAll('~0', '~')] as Node, document);
};

type Case = [where: string, schemaPointer: string, example: unknown];

/** Every (schema, example) pair: walks the document, noting where each schema is, by JSON pointer. */
function examples(): Case[] {
  const found: Case[] = [];
  const walk = (node: unknown, pointer: string) => {
    if (Array.isArray(node)) return node.forEach((item, index) => walk(item, `${pointer}/${index}`));
    if (!isNode(node)) return;
    const inSchema = /\/(schema|schemas\/[^/]+)(\/|$)/.test(pointer);
    if (isNode(node.schema) && !inSchema) {
      const schemaAt = `${pointer}/schema`;
      if ('example' in node) found.push([`${pointer}/example`, schemaAt, node.example]);
      if (isNode(node.examples)) {
        for (const [name, example] of Object.entries(node.examples)) {
          found.push([`${pointer}/examples/${escape(name)}`, schemaAt, resolve(example as Node).value]);
        }
      }
    } else if (inSchema && 'example' in node && !('in' in node)) {
      found.push([`${pointer}/example`, pointer, node.example]);
    }
    for (const [key, value] of Object.entries(node)) {
      if (key !== 'example' && key !== 'examples') walk(value, `${pointer}/${escape(key)}`);
    }
  };
  walk(document, '');
  return found;
}

const cases = examples();

test('the walk finds the examples of requests, answers, webhooks, parameters and headers', () => {
  const where = cases.map(([at]) => at);
  for (const part of ['/paths/', '/webhooks/', '/components/responses/', '/components/parameters/', '/components/headers/']) {
    expect(where.some((at) => at.startsWith(part))).toBe(true);
  }
  expect(where).toContain('/webhooks/notification.completed/post/requestBody/content/application~1json/example');
  expect(where).toContain('/webhooks/delivery.failed/post/requestBody/content/application~1json/example');
});

test.each(cases)('%s is valid against its schema', (_where, schemaPointer, example) => {
  const validate = ajv.getSchema(`openapi#${schemaPointer.split('/').map(encodeURIComponent).join('/')}`)!;
  const valid = validate(example);
  expect(valid ? [] : validate.errors).toEqual([]);
});
