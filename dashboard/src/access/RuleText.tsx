/** How pages show the rules that connect two peers. */
import { Anchor, Badge, Group, Stack, Text } from "@mantine/core";
import { Link as RouterLink } from "react-router";
import { ruleTrafficText, type Applied, type Link } from "./evaluate";

function One({ a, drop, names }: { a: Applied; drop?: boolean; names: (id: string) => string }) {
  const r = a.rule;
  return (
    <Group gap={6} wrap="wrap">
      <Badge size="sm" variant="light" color={drop ? "red" : "green"}>
        {drop ? "drop " : ""}
        {ruleTrafficText(r)}
      </Badge>
      <Text size="xs" c="dimmed">
        <Anchor component={RouterLink} to={`/policies?edit=${encodeURIComponent(r.policyId)}`} size="xs">
          {r.policyName}
        </Anchor>
        {r.allowAll ? " (all to all)" : r.ruleName !== r.policyName ? ` › ${r.ruleName}` : ""}
        {a.postureOf.length > 0 && ` · if ${a.postureOf.map(names).join(" or ")} passes ${r.postureChecks.join(", ")}`}
      </Text>
    </Group>
  );
}

/** The accept rules of a link, then the drop rules that cut into them. */
export function LinkRules({ link, names }: { link: Link; names: (id: string) => string }) {
  return (
    <Stack gap={2}>
      {link.accepts.map((a) => (
        <One key={`a${a.rule.policyId}/${a.rule.ruleId}`} a={a} names={names} />
      ))}
      {link.drops.map((a) => (
        <One key={`d${a.rule.policyId}/${a.rule.ruleId}`} a={a} drop names={names} />
      ))}
    </Stack>
  );
}
