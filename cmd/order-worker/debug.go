package main

import (
	"context"

	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/smithy-go/middleware"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
)

// countCalls makes c count its SQS calls by operation and the Redis clients their round
// trips (a pipeline is one), as junban_debug_sqs_calls_total and
// junban_debug_redis_roundtrips_total. Only with JUNBAN_PPROF: it is there to see what one
// event costs. The single commands that go through the shared round trips (deps.shared, a
// pipeshare.Client) go out in pipelines of its own client, which counts them by the
// pipeline's first command.
func countCalls(c *sqs.Client, reg prometheus.Registerer, rcs ...redis.UniversalClient) (*sqs.Client, error) {
	sqsCalls := prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "junban", Subsystem: "debug", Name: "sqs_calls_total", Help: "SQS API calls by operation.",
	}, []string{"op"})
	redisTrips := prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "junban", Subsystem: "debug", Name: "redis_roundtrips_total", Help: "Redis round trips by first command.",
	}, []string{"cmd"})
	for _, col := range []prometheus.Collector{sqsCalls, redisTrips} {
		if err := reg.Register(col); err != nil {
			return nil, err
		}
	}
	for _, rc := range rcs {
		rc.AddHook(tripHook{redisTrips})
	}
	return sqs.New(c.Options(), func(o *sqs.Options) {
		o.APIOptions = append(o.APIOptions, func(st *middleware.Stack) error {
			return st.Initialize.Add(middleware.InitializeMiddlewareFunc("junban-count", func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
				sqsCalls.WithLabelValues(awsmiddleware.GetOperationName(ctx)).Inc()
				return next.HandleInitialize(ctx, in)
			}), middleware.After)
		})
	}), nil
}

type tripHook struct{ c *prometheus.CounterVec }

func (h tripHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h tripHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.c.WithLabelValues(cmd.Name()).Inc()
		return next(ctx, cmd)
	}
}

func (h tripHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		name := "pipeline"
		if len(cmds) > 0 {
			name = "pipeline:" + cmds[0].Name()
		}
		h.c.WithLabelValues(name).Inc()
		return next(ctx, cmds)
	}
}
