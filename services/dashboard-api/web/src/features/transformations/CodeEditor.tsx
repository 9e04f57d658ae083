import { defaultKeymap, history, historyKeymap } from "@codemirror/commands";
import { javascript } from "@codemirror/lang-javascript";
import { bracketMatching, HighlightStyle, syntaxHighlighting } from "@codemirror/language";
import {
  Compartment,
  EditorSelection,
  EditorState,
  StateEffect,
  StateField,
} from "@codemirror/state";
import {
  Decoration,
  type DecorationSet,
  drawSelection,
  EditorView,
  highlightActiveLine,
  keymap,
  lineNumbers,
} from "@codemirror/view";
import { tags } from "@lezer/highlight";
import { useEffect, useRef } from "react";
import { StyleModule } from "style-mod";

/** Where the code is wrong: 1-based line and column (column may be unknown). */
export type CodeProblem = { line: number; column: number | null };

// Token colours are classes styled in styles.css with the theme's variables: both themes pass
// WCAG AA (CodeMirror's default highlight style does not on a dark panel).
const HIGHLIGHT = HighlightStyle.define([
  {
    tag: [tags.keyword, tags.controlKeyword, tags.definitionKeyword, tags.moduleKeyword],
    class: "cm-t-keyword",
  },
  { tag: [tags.string, tags.special(tags.string), tags.regexp], class: "cm-t-string" },
  { tag: [tags.number, tags.bool, tags.null, tags.atom], class: "cm-t-literal" },
  { tag: [tags.comment, tags.lineComment, tags.blockComment], class: "cm-t-comment" },
  {
    tag: [tags.function(tags.variableName), tags.function(tags.propertyName)],
    class: "cm-t-function",
  },
  { tag: tags.invalid, class: "cm-t-invalid" },
]);

/** The editable area's name, description and validity, for assistive technology. */
function contentAttributes(labelledBy: string, describedBy: string | undefined, invalid: boolean) {
  return EditorView.contentAttributes.of({
    "aria-labelledby": labelledBy,
    ...(describedBy ? { "aria-describedby": describedBy } : {}),
    "aria-invalid": invalid ? "true" : "false",
  });
}

// a compartment is a key into each editor's state: one serves every editor
const attributes = new Compartment();

/** CodeMirror styles itself with a <style> element, which the dashboard's CSP (`style-src
 * 'self'`) refuses. Its style-mod puts the rules in a constructed stylesheet instead (not an
 * inline style) for a root without a <head>: the document's style set is made once that way,
 * with `head` hidden for that call only, and every editor after it uses that set. */
function adoptStyles(): void {
  const head = Object.getOwnPropertyDescriptor(document, "head");
  Object.defineProperty(document, "head", { value: null, configurable: true });
  try {
    StyleModule.mount(document, []);
  } finally {
    if (head) Object.defineProperty(document, "head", head);
    else delete (document as { head?: unknown }).head;
  }
}
adoptStyles();

/** The editor in the dashboard's colours (theme variables: AA in light and dark). */
const THEME = EditorView.theme({
  "&": {
    border: "1px solid var(--line)",
    borderRadius: "0.25rem",
    background: "var(--bg)",
    color: "var(--fg)",
    fontSize: "0.85rem",
  },
  "&.cm-focused": { outline: "2px solid var(--focus)", outlineOffset: "2px" },
  ".cm-scroller": { fontFamily: "var(--font-mono)", minHeight: "14rem", maxHeight: "32rem" },
  ".cm-content": { caretColor: "var(--fg)" },
  ".cm-cursor, .cm-dropCursor": { borderLeftColor: "var(--fg)" },
  ".cm-gutters": {
    background: "var(--panel)",
    color: "var(--muted)",
    borderRight: "1px solid var(--line)",
  },
  ".cm-activeLine": { background: "var(--hover)" },
  ".cm-activeLineGutter": { background: "var(--hover)", color: "var(--fg)" },
  "&.cm-focused > .cm-scroller > .cm-selectionLayer .cm-selectionBackground, .cm-selectionBackground":
    { background: "var(--line)" },
  ".cm-matchingBracket, &.cm-focused .cm-matchingBracket": {
    background: "var(--hover)",
    outline: "1px solid var(--muted)",
    color: "inherit",
  },
  ".cm-nonmatchingBracket, &.cm-focused .cm-nonmatchingBracket": { color: "var(--bad)" },
  ".cm-problem-line, .cm-problem-line.cm-activeLine": {
    background: "var(--problem-bg)",
    boxShadow: "inset 3px 0 0 var(--bad)",
  },
});

const setProblem = StateEffect.define<CodeProblem | null>();

/** The line the server named, marked (a class on the line, and `aria-invalid` on the editor). */
const problemField = StateField.define<DecorationSet>({
  create: () => Decoration.none,
  update(marks, tr) {
    let next = marks.map(tr.changes);
    for (const effect of tr.effects) {
      if (!effect.is(setProblem)) continue;
      const problem = effect.value;
      if (problem === null || problem.line < 1 || problem.line > tr.state.doc.lines) {
        next = Decoration.none;
      } else {
        const line = tr.state.doc.line(problem.line);
        next = Decoration.set([
          Decoration.line({
            class: "cm-problem-line",
            attributes: { "data-problem": "true" },
          }).range(line.from),
        ]);
      }
    }
    return next;
  },
  provide: (field) => EditorView.decorations.from(field),
});

/** A JavaScript editor (CodeMirror 6), loaded on first use. Tab is not bound (no
 * `indentWithTab`): it moves the focus on, as in any field (indent with Ctrl+] and Ctrl+[); Esc
 * only collapses a multiple selection, else it is the page's. `labelledBy` / `describedBy` name
 * the editable area; a new `problem` marks its line and puts the cursor there. */
export function CodeEditor({
  value,
  onChange,
  labelledBy,
  describedBy,
  problem,
}: {
  value: string;
  onChange: (value: string) => void;
  labelledBy: string;
  describedBy?: string;
  problem: CodeProblem | null;
}) {
  const host = useRef<HTMLDivElement>(null);
  const view = useRef<EditorView | null>(null);
  const changed = useRef(onChange);
  changed.current = onChange;

  // created once; later props are pushed into the view by the effects below
  // biome-ignore lint/correctness/useExhaustiveDependencies: the view is made once
  useEffect(() => {
    if (!host.current) return;
    const editor = new EditorView({
      parent: host.current,
      state: EditorState.create({
        doc: value,
        extensions: [
          THEME,
          lineNumbers(),
          history(),
          drawSelection(),
          highlightActiveLine(),
          bracketMatching(),
          javascript(),
          syntaxHighlighting(HIGHLIGHT),
          keymap.of([...defaultKeymap, ...historyKeymap]),
          problemField,
          attributes.of(contentAttributes(labelledBy, describedBy, problem !== null)),
          EditorView.lineWrapping,
          EditorView.updateListener.of((update) => {
            if (update.docChanged) changed.current(update.state.doc.toString());
          }),
        ],
      }),
    });
    view.current = editor;
    return () => {
      editor.destroy();
      view.current = null;
    };
  }, []);

  useEffect(() => {
    const editor = view.current;
    if (editor && editor.state.doc.toString() !== value)
      editor.dispatch({ changes: { from: 0, to: editor.state.doc.length, insert: value } });
  }, [value]);

  const invalid = problem !== null;
  useEffect(() => {
    view.current?.dispatch({
      effects: attributes.reconfigure(contentAttributes(labelledBy, describedBy, invalid)),
    });
  }, [labelledBy, describedBy, invalid]);

  // by value: a re-render with the same problem must not move the cursor again
  const line = problem?.line ?? null;
  const column = problem?.column ?? null;
  useEffect(() => {
    const editor = view.current;
    if (!editor) return;
    if (line === null || line < 1 || line > editor.state.doc.lines) {
      editor.dispatch({ effects: setProblem.of(null) });
      return;
    }
    const at = editor.state.doc.line(line);
    const cursor = Math.min(at.to, at.from + Math.max(0, (column ?? 1) - 1));
    editor.dispatch({
      effects: [
        setProblem.of({ line, column }),
        EditorView.scrollIntoView(cursor, { y: "center" }),
      ],
      selection: EditorSelection.cursor(cursor),
    });
  }, [line, column]);

  return <div ref={host} className="code-editor" data-testid="code-editor" />;
}

export default CodeEditor;
