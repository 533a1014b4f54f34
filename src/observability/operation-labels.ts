/**
 * Which operation names become metric labels. Names come from the parsed document, so any caller
 * can invent them: a label set filled on a first-come basis lets one caller take every label (its
 * own names counted, everyone else's as `other`) and read, in the labels, what names others use.
 * So a name gets a label of its own only when it cannot be squatted: it is the name of a trusted
 * document (the manifest is the deployment's own), or it was first sent by an operator. Any other
 * caller's new names count as `other`; a name once labelled stays labelled for everyone.
 */

/** Label of an operation without a name. */
const ANONYMOUS_OPERATION = 'anonymous';
/** Label of every name that is not labelled on its own. */
const OTHER_OPERATION = 'other';
/** Longest operation name kept as a label; longer ones count as {@link OTHER_OPERATION}. */
const MAX_OPERATION_NAME_LENGTH = 64;

/** Where an operation's name came from. */
export interface OperationNameSource {
  /** The caller is an operator (the deployment's own people and services). */
  fromOperator: boolean;
  /** The document ran is a listed trusted document. */
  trustedDocument: boolean;
}

/** The label of an operation name; see the module's comment for which names get their own. */
export type OperationLabeler = (name: string | null | undefined, source: OperationNameSource) => string;

/** At most `max` names are labelled on their own; later ones are {@link OTHER_OPERATION} whoever sends them. */
export function createOperationLabels(max: number): OperationLabeler {
  const labelled = new Set<string>();
  return (name, source) => {
    if (name === null || name === undefined || name === '') return ANONYMOUS_OPERATION;
    if (name.length > MAX_OPERATION_NAME_LENGTH) return OTHER_OPERATION;
    if (labelled.has(name)) return name;
    if (!source.fromOperator && !source.trustedDocument) return OTHER_OPERATION;
    if (labelled.size >= max) return OTHER_OPERATION;
    labelled.add(name);
    return name;
  };
}
