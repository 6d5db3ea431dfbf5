package tracing

import (
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/resource"
)

// resourceOf describes the process: the service's name, and what the
// OTEL_RESOURCE_ATTRIBUTES and OTEL_SERVICE_NAME variables add.
func resourceOf(service string) *resource.Resource {
	r, err := resource.Merge(resource.NewSchemaless(attribute.String("service.name", service)), resource.Environment())
	if err != nil {
		return resource.NewSchemaless(attribute.String("service.name", service))
	}
	return r
}
