/**
 * Lazy wraps a page loaded on first visit (React.lazy) so that the first
 * page's bundle stays small: a loader shows while its chunk arrives.
 */
import { Center, Loader } from "@mantine/core";
import { Suspense, type ReactNode } from "react";

export function Lazy({ children }: { children: ReactNode }) {
  return (
    <Suspense
      fallback={
        <Center p="xl">
          <Loader aria-label="Loading the page" />
        </Center>
      }
    >
      {children}
    </Suspense>
  );
}
