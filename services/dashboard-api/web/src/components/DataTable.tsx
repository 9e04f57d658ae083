import type { ReactNode } from "react";
import { Empty } from "./ui";

/** One column of a DataTable: its header and how a row fills its cell. */
export type Column<Row> = {
  header: string;
  /** The header is read by screen readers only (an actions column shows none). */
  srOnly?: boolean;
  /** Classes of this column's cells, besides the table's padding. */
  className?: string;
  cell: (row: Row) => ReactNode;
};

const LOOK = {
  /** A table standing on its own on a page. */
  panel: { table: "w-full rounded-lg border border-line bg-panel text-sm", pad: "p-2" },
  /** A table inside a section that already is a panel. */
  inset: { table: "w-full text-sm", pad: "p-1.5" },
};

/** A table of rows, one column per `columns` entry, named by `caption` (screen readers only; the
 * table's accessible name). With no rows it shows `empty` instead, if given. */
export function DataTable<Row>({
  caption,
  columns,
  rows,
  rowKey,
  empty,
  rowTestId,
  look = "panel",
}: {
  caption: string;
  columns: Column<Row>[];
  rows: readonly Row[];
  rowKey: (row: Row) => string;
  empty?: ReactNode;
  rowTestId?: string;
  look?: keyof typeof LOOK;
}) {
  if (rows.length === 0 && empty !== undefined) return <Empty>{empty}</Empty>;
  const { table, pad } = LOOK[look];
  return (
    <table className={table}>
      <caption className="sr-only">{caption}</caption>
      <thead>
        <tr className="text-left">
          {columns.map((column) => (
            <th key={column.header} className={pad}>
              {column.srOnly ? <span className="sr-only">{column.header}</span> : column.header}
            </th>
          ))}
        </tr>
      </thead>
      <tbody>
        {rows.map((row) => (
          <tr key={rowKey(row)} className="border-t border-line align-top" data-testid={rowTestId}>
            {columns.map((column) => (
              <td
                key={column.header}
                className={column.className ? `${pad} ${column.className}` : pad}
              >
                {column.cell(row)}
              </td>
            ))}
          </tr>
        ))}
      </tbody>
    </table>
  );
}
