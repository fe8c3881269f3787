import { Button, Code, CopyButton, Group } from "@mantine/core";

/** A secret shown once, with a copy button. */
export function ShownOnce({ value, label, testId }: { value: string; label: string; testId?: string }) {
  return (
    <Group wrap="nowrap" gap="xs" align="flex-start">
      <Code block style={{ flex: 1, wordBreak: "break-all", whiteSpace: "pre-wrap" }} data-testid={testId}>
        {value}
      </Code>
      <CopyButton value={value}>
        {({ copied, copy }) => (
          <Button size="xs" variant={copied ? "filled" : "light"} color={copied ? "teal" : undefined} onClick={copy} aria-label={label}>
            {copied ? "Copied" : "Copy"}
          </Button>
        )}
      </CopyButton>
    </Group>
  );
}
