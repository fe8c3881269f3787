/**
 * Allowed marks its control unusable when the user may not use it, and says
 * why in a tooltip. The control stays focusable (aria-disabled rather than
 * disabled, as Mantine recommends for tooltips on disabled buttons), so
 * keyboard users reach the reason too, and screen readers hear it as the
 * control's description.
 */
import { Tooltip } from "@mantine/core";
import { cloneElement, isValidElement, type MouseEvent, type ReactElement } from "react";

type Control = ReactElement<{ disabled?: boolean; onClick?: (e: MouseEvent) => void }>;

export function Allowed({ why, children }: { why: string; children: Control }) {
  if (!why || !isValidElement(children)) return children;
  return (
    <Tooltip label={why} withArrow>
      {cloneElement(children, {
        disabled: false,
        "data-disabled": true,
        "aria-disabled": true,
        "aria-description": why,
        type: "button",
        onClick: (e: MouseEvent) => e.preventDefault(),
      } as Record<string, unknown>)}
    </Tooltip>
  );
}
