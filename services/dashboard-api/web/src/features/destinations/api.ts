import { queryOptions } from "@tanstack/react-query";
import { api, call } from "../../api/client";
import type { Destination } from "../../api/types";

export const destinationsQuery = queryOptions({
  queryKey: ["destinations"],
  queryFn: (): Promise<Destination[]> => call(() => api.GET("/api/v1/destinations")),
});

export function destinationQuery(dest: string) {
  return queryOptions({
    queryKey: ["destinations", dest],
    queryFn: (): Promise<Destination> =>
      call(() => api.GET("/api/v1/destinations/{dest}", { params: { path: { dest } } })),
  });
}

/** What the write-only header values read as; sent back, it keeps the stored value. */
export const MASK = "********";
