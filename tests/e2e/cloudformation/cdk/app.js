// A CDK app of the kind teams write: an application queue, its dead-letter queue, and a
// policy letting a partner account send. Deployed to KQS by test_e2e_cdk.py with a
// synthesizer that needs no bootstrap stack (no assets, no S3, no roles).
const cdk = require("aws-cdk-lib");
const iam = require("aws-cdk-lib/aws-iam");
const sqs = require("aws-cdk-lib/aws-sqs");

const app = new cdk.App();
const stack = new cdk.Stack(app, process.env.KQS_CDK_STACK || "KqsCdkQueues", {
  synthesizer: new cdk.BootstraplessSynthesizer(),
});
const deadLetters = new sqs.Queue(stack, "DeadLetters", {
  retentionPeriod: cdk.Duration.days(14),
});
const orders = new sqs.Queue(stack, "Orders", {
  visibilityTimeout: cdk.Duration.seconds(45),
  deadLetterQueue: { queue: deadLetters, maxReceiveCount: 5 },
});
orders.addToResourcePolicy(
  new iam.PolicyStatement({
    principals: [new iam.AccountPrincipal("111122223333")],
    actions: ["sqs:SendMessage"],
    resources: [orders.queueArn],
  }),
);
new cdk.CfnOutput(stack, "OrdersUrl", { value: orders.queueUrl });
new cdk.CfnOutput(stack, "DeadLettersArn", { value: deadLetters.queueArn });
