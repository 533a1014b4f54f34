/**
 * The support notes this example keeps in memory. They are about the emulator's demo customers and
 * accounts (`emulator/store/demo-data.ts`), so the supergraph can join them with the facade's data.
 */

/** Where a note stands; the GraphQL enum `SupportNoteStatus`. */
export type SupportNoteStatus = 'OPEN' | 'RESOLVED';

/** One support note as this subgraph stores it: references to facade entities are plain ids. */
export type SupportNote = {
  id: string;
  customerId: string;
  /** The account the note is about; its customer is always `customerId`. */
  accountId: string | null;
  status: SupportNoteStatus;
  subject: string;
  body: string;
  author: string;
  createdAt: string;
};

/** What `supportNotes` can be narrowed by. */
export type SupportNoteFilter = {
  customerId?: string | null;
  status?: SupportNoteStatus | null;
};

/** Read access to a fixed set of notes. */
export type SupportNoteStore = {
  /** The notes matching `filter`, newest first (ties broken by id, so the order is stable). */
  list(filter?: SupportNoteFilter): SupportNote[];
  /** One note by id, or undefined. */
  get(id: string): SupportNote | undefined;
};

/** Deterministic demo notes. Several point at the same accounts, which is what batching is about. */
export const demoSupportNotes: readonly SupportNote[] = [
  {
    id: 'note_001',
    customerId: 'cus_acme',
    accountId: 'acc_acme_eth',
    status: 'RESOLVED',
    subject: 'Sweep rule set up',
    body: 'Helped Acme configure the sweep from their Ethereum wallet to cold storage.',
    author: 'agent.mara',
    createdAt: '2025-01-06T09:15:00Z',
  },
  {
    id: 'note_002',
    customerId: 'cus_acme',
    accountId: 'acc_acme_eth',
    status: 'OPEN',
    subject: 'Developer fee question',
    body: 'Acme asks why the developer fee shows on the Ethereum wallet; explaining fixed fee and bips.',
    author: 'agent.mara',
    createdAt: '2025-01-08T14:02:00Z',
  },
  {
    id: 'note_003',
    customerId: 'cus_acme',
    accountId: 'acc_acme_polygon',
    status: 'OPEN',
    subject: 'Pending balance on Polygon wallet',
    body: 'Top-up shows as pending on the Polygon wallet; waiting for settlement.',
    author: 'agent.ravi',
    createdAt: '2025-01-09T10:30:00Z',
  },
  {
    id: 'note_004',
    customerId: 'cus_acme',
    accountId: null,
    status: 'RESOLVED',
    subject: 'Onboarding call',
    body: 'Walked Acme through related parties and capability applications.',
    author: 'agent.ravi',
    createdAt: '2025-01-03T16:45:00Z',
  },
  {
    id: 'note_005',
    customerId: 'cus_ada',
    accountId: 'acc_ada_sol',
    status: 'OPEN',
    subject: 'Wallet label change',
    body: 'Ada would like her wallet relabelled; told her labels are set at creation for now.',
    author: 'agent.mara',
    createdAt: '2025-01-10T08:05:00Z',
  },
  {
    id: 'note_006',
    customerId: 'cus_ada',
    accountId: 'acc_ada_sol',
    status: 'RESOLVED',
    subject: 'Balance check',
    body: 'Confirmed the available balance after the sandbox top-up.',
    author: 'agent.lee',
    createdAt: '2025-01-04T11:20:00Z',
  },
  {
    id: 'note_007',
    customerId: 'cus_globex',
    accountId: null,
    status: 'OPEN',
    subject: 'Documents under review',
    body: 'Globex uploaded incorporation documents; compliance is reviewing them.',
    author: 'agent.lee',
    createdAt: '2025-01-07T13:40:00Z',
  },
];

/** Builds a store over `notes` (the demo notes by default). The notes are never changed. */
export function createSupportNoteStore(notes: readonly SupportNote[] = demoSupportNotes): SupportNoteStore {
  const newestFirst = [...notes].sort(
    (a, b) => b.createdAt.localeCompare(a.createdAt) || a.id.localeCompare(b.id),
  );
  const byId = new Map(notes.map((note) => [note.id, note]));
  return {
    list(filter = {}) {
      return newestFirst.filter(
        (note) =>
          (filter.customerId == null || note.customerId === filter.customerId) &&
          (filter.status == null || note.status === filter.status),
      );
    },
    get(id) {
      return byId.get(id);
    },
  };
}
