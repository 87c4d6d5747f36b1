import { defineSearchAttributeKey, SearchAttributeType, type TypedSearchAttributes } from '@temporalio/common';

/**
 * Custom search attributes every workflow sets, so an operator can filter the Temporal UI by
 * organization and by the resource a workflow carries (e.g. `ResourceType = "card"`).
 * Imported by workflows: this file must stay free of Node APIs.
 */
export const OrganizationId = defineSearchAttributeKey('OrganizationId', SearchAttributeType.KEYWORD);
export const ResourceType = defineSearchAttributeKey('ResourceType', SearchAttributeType.KEYWORD);
export const ResourceId = defineSearchAttributeKey('ResourceId', SearchAttributeType.KEYWORD);

export const SEARCH_ATTRIBUTE_KEYS = [OrganizationId, ResourceType, ResourceId];

/** The search attributes of a workflow that carries one resource. */
export function resourceSearchAttributes(resource: {
  organizationId?: string;
  type: string;
  id: string;
}): ConstructorParameters<typeof TypedSearchAttributes>[0] {
  return [
    ...(resource.organizationId ? [{ key: OrganizationId, value: resource.organizationId }] : []),
    { key: ResourceType, value: resource.type },
    { key: ResourceId, value: resource.id },
  ];
}
