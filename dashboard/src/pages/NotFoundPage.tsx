import { Anchor, Stack, Text, Title } from "@mantine/core";
import { Link } from "react-router";

export function NotFoundPage() {
  return (
    <Stack>
      <Title order={2}>Page not found</Title>
      <Text>
        There is no page here. <Anchor component={Link} to="/peers">Go to the peers</Anchor>.
      </Text>
    </Stack>
  );
}
