// The links of openapi.yaml are how a stateful fuzzer (and a reader) goes from one answer to the
// next request: each must name an operation that exists and parameters that operation has.
import { loadDocument } from '../src/http/document.ts';

type Parameter = { name?: string; in?: string; $ref?: string };
type Link = { operationId: string; parameters?: Record<string, string>; requestBody?: unknown };
type Operation = { operationId: string; parameters?: Parameter[]; responses: Record<string, { links?: Record<string, Link> }> };

const document = loadDocument() as {
  paths: Record<string, Record<string, Operation | Parameter[]>>;
  components: { parameters: Record<string, Parameter> };
};

const operations = new Map<string, { operation: Operation; parameters: Parameter[] }>();
for (const item of Object.values(document.paths)) {
  const shared = (item.parameters as Parameter[] | undefined) ?? [];
  for (const [method, operation] of Object.entries(item)) {
    if (method === 'parameters') continue;
    const op = operation as Operation;
    const resolved = [...shared, ...(op.parameters ?? [])].map((p) => (p.$ref ? document.components.parameters[p.$ref.split('/').pop()!] : p));
    operations.set(op.operationId, { operation: op, parameters: resolved });
  }
}

const links = [...operations.values()].flatMap(({ operation }) =>
  Object.entries(operation.responses).flatMap(([status, response]) =>
    Object.entries(response.links ?? {}).map(([name, link]) => ({ from: `${operation.operationId} ${status}`, name, link })),
  ),
);

test.each(links.map((entry) => [`${entry.from} → ${entry.name}`, entry]))('%s names an operation and parameters it has', (_, { link }) => {
  const target = operations.get(link.operationId);
  expect(target).toBeDefined();
  for (const key of Object.keys(link.parameters ?? {})) {
    const [location, name] = key.includes('.') ? key.split('.') : [undefined, key];
    expect(target!.parameters.some((p) => p.name === name && (location === undefined || p.in === location))).toBe(true);
  }
});

const targets = (operationId: string) =>
  Object.values(operations.get(operationId)!.operation.responses).flatMap((response) => Object.values(response.links ?? {}).map((link) => link.operationId));

test('the lists lead to what a fuzzer needs real ids for', () => {
  expect(targets('listNotifications')).toEqual(expect.arrayContaining(['getNotification', 'listDeliveries', 'getNotificationBreakdown', 'cancelNotification']));
  expect(targets('sendNotification')).toEqual(expect.arrayContaining(['getNotification', 'listDeliveries', 'getNotificationBreakdown', 'cancelNotification']));
  expect(targets('listDeliveries')).toEqual(['reportEvent']);
});

// A stateful fuzzer starts its chains at every POST that has links, with generated input: a cancel
// of a random id is a 404 that spends a step. (Measured with schemathesis 4.32.5, stateful phase
// alone, 10 seeds: with a link from the cancel, 920 of its calls and 2 of 10 runs with a cancel
// served; without, 238 and 4.)
test('a cancel links nowhere, so it is reached only with real ids', () => {
  expect(targets('cancelNotification')).toEqual([]);
});

// A fuzzer that infers resources from responses (schemathesis 4.32) defines each resource from the
// first operation it reads: from the send, whose path names notifications and whose answer holds a
// `notification` object, it takes the content (title, body, no id) for the notification, and then
// feeds no real id to the operations on one notification. Read from the list first, the resource
// has its `id`: in plain runs from outside, "missing test data" for the notification's operations
// went from 1–2 a run to none.
test('the list of notifications comes before the send in the document', () => {
  expect(Object.keys(document.paths['/api/v1/notifications'])).toEqual(['get', 'post']);
});
