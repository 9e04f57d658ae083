import { queryOptions } from "@tanstack/react-query";
import { ApiError, api, call } from "../../api/client";
import type { Transformation, TransformationTestResult, TransformRequest } from "../../api/types";
import type { CodeProblem } from "./CodeEditor";

export { transformationsQuery } from "../routes/api";

export function transformationQuery(trf: string) {
  return queryOptions({
    queryKey: ["transformations", trf],
    queryFn: (): Promise<Transformation> =>
      call(() => api.GET("/api/v1/transformations/{trf}", { params: { path: { trf } } })),
  });
}

/** What a test runs on: one of the owner's events, or a request as a transformation sees it. */
export type TestInput = { event_id: string } | { request: TransformRequest };

/** Runs the saved code on `input`; delivers nothing. */
export function testTransformation(
  trf: string,
  input: TestInput,
): Promise<TransformationTestResult> {
  return call(() =>
    api.POST("/api/v1/transformations/{trf}/test", { params: { path: { trf } }, body: input }),
  );
}

/** The starting code of a new transformation: the handler contract, returning the request. */
export const TEMPLATE = `addHandler('transform', (request, context) => {
  // request: { headers, body, query, path }; context.env: this transformation's env
  console.log('transforming', request.path);
  return request;
});
`;

/** A save's refusal of the code (a 422 naming `code`): its message and where, when known. */
export function codeRefusal(
  error: unknown,
): { message: string; problem: CodeProblem | null } | null {
  if (!(error instanceof ApiError) || error.status !== 422) return null;
  const detail = error.body.detail;
  if (!Array.isArray(detail)) return null;
  for (const d of detail) {
    if (d === null || typeof d !== "object" || !Array.isArray(d.loc)) continue;
    const loc = d.loc[0] === "body" ? d.loc.slice(1) : d.loc;
    if (loc[0] !== "code") continue;
    const line = typeof d.line === "number" ? d.line : null;
    const column = typeof d.column === "number" ? d.column : null;
    return { message: String(d.msg ?? ""), problem: line === null ? null : { line, column } };
  }
  return null;
}

/** The routes a 409 names (`webhook/route`), when the transformation is still in use. */
export function routesInUse(error: unknown): string[] | null {
  if (!(error instanceof ApiError) || error.status !== 409) return null;
  const routes = error.body.routes;
  return Array.isArray(routes) ? routes.map(String) : null;
}
