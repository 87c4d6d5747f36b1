/** Letters whose spoken name begins with a vowel sound: an abbreviation starting with one takes "an" ("an NG bank code"). */
const VOWEL_SOUND_LETTERS = /^[AEFHILMNORSX]/;

/**
 * The word with the indefinite article English puts before it, for messages built around a name:
 * "an ethereum address", "a bitcoin address", "an invoice", "an NG bank code", "a KE number".
 */
export function withArticle(word: string): string {
  const abbreviation = /^[A-Z][A-Z0-9_]+$/.test(word);
  const vowelSound = abbreviation ? VOWEL_SOUND_LETTERS.test(word) : /^[aeiou]/i.test(word);
  return `${vowelSound ? 'an' : 'a'} ${word}`;
}
